/**
 * How a collection that keeps a run's arguments shows them (docs/security.md, "What is masked"): `args` (`salt_jobs`,
 * `actions`), `arg` and `kwarg` (`tasks`, `rollouts`). Operators and admins see them with every secret masked
 * (lib/security/masking.ts; job records are stored masked too, this covers records stored before; tasks and
 * rollouts keep the call whole, they must run it), viewers see them withheld with their shape kept (what ran and
 * where, never with what), and a viewer's `where` or `sort` may not name them (a filter would reveal them a
 * comparison at a time). Embedded records are rendered without the caller: withheld, as for a viewer.
 */
import type { Context, ServiceSchema } from "moleculer";
import type { EveThis, RestContext } from "./eve-collection.mixin";
import { readMethods } from "./eve-collection/reads";
import { EveError } from "../lib/eve/errors";
import { filterTouches, parseSort, parseWhere, pathsOverlap, type QueryArgs } from "../lib/eve/query";
import { argsAsShown, kwargAsShown, seesRunArgs } from "../lib/security/masking";
import type { Doc } from "../lib/storage/store";

type UserMeta = { user?: { role?: string } };

/** The fields that hold a run's arguments: positional lists, and keyword dicts. */
const ARG_LISTS = ["args", "arg"];
const KWARG_DICTS = ["kwarg"];

export const RunArgs: Partial<ServiceSchema> = {
	methods: {
		transformOutput(this: EveThis, doc: Doc, _single: boolean, ctx?: Context<unknown, UserMeta>): Doc {
			const role = ctx?.meta.user?.role;
			let out = doc;
			for (const f of ARG_LISTS) if (doc[f] !== undefined) out = { ...out, [f]: argsAsShown(doc[f], role) };
			for (const f of KWARG_DICTS) if (doc[f] !== undefined) out = { ...out, [f]: kwargAsShown(doc[f], role) };
			return out;
		},

		/** Viewers read these records differently (arguments withheld): their reads are cached apart. */
		readVariant(this: EveThis, ctx: Context<unknown, UserMeta>): string {
			return seesRunArgs(ctx.meta.user?.role) ? "args" : "";
		},

		eveList(this: EveThis, ctx: RestContext & Context<unknown, UserMeta>, args: QueryArgs) {
			if (!seesRunArgs(ctx.meta.user?.role)) {
				const fields = [...ARG_LISTS, ...KWARG_DICTS];
				const touched =
					filterTouches(parseWhere(args.get("where")), fields) ??
					parseSort(args.get("sort")).find(([f]) => fields.some(a => pathsOverlap(f, a)))?.[0];
				if (touched)
					throw new EveError(
						403,
						`'${touched}' is a run's arguments, which a ${ctx.meta.user?.role ?? "caller"} is not shown: it cannot be filtered or sorted on`,
					);
			}
			return readMethods.eveList.call(this, ctx, args);
		},
	},
};
