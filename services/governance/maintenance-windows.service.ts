/**
 * Owns the `maintenance_windows` collection (docs/security.md, "Maintenance windows"): when governed functions may
 * run on governed hosts. A window is `{name, targets: {groups?, target?}, functions: [globs], rrule, start, timezone,
 * duration, enabled?}`; admins write them. Outside every window that governs a host for a function, that function is
 * refused on that host (409, naming the next opening); everything else runs as before.
 *
 * The run door asks `check` for every run (services/cm-gateway/run-door.ts), whatever started it; hosts and
 * operators ask `ofHost` (GET /hosts/{id}/maintenance_windows) and `preview` for the next openings.
 */
import type { Context } from "moleculer";
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../../lib/eve/ids";
import type { Issues } from "../../lib/eve/errors";
import { Malformed, NotFound, OutsideWindow } from "../../lib/errors";
import { QueryArgs } from "../../lib/eve/query";
import { canonical } from "../../lib/eve/etag";
import {
	PREVIEW_HORIZON_MS,
	compileWindow,
	isCompiled,
	nextOpenings,
	openingAt,
	type CompiledWindow,
	type Opening,
} from "../../lib/fleet/maintenance";
import type { Doc } from "../../lib/storage/store";
import {
	FUNCTIONS_SCHEMA,
	TARGETS_SCHEMA,
	governedNames,
	governs,
	hostsOf,
	isDryRun,
	targetsIssues,
	type HostsMemo,
	type Targets,
} from "./scope";

/** A window's next opening as answers show it. */
export interface NextWindow {
	window: string;
	name: string;
	start: string;
	end: string;
}

/** What `check` answers: the governed hosts outside their windows (none: the run may go), and the first opening among theirs. */
export interface WindowVerdict {
	refused: string[];
	next: NextWindow | null;
}

interface WindowsMembers {
	compiled(doc: Doc): CompiledWindow;
	governing(names: string[] | null): Promise<Doc[]>;
	countParam(ctx: Context<{ query?: unknown }>): number;
	openingView(doc: Doc, now: Date, count: number): Doc;
	compiledCache: Map<string, { updated: string; window: CompiledWindow }>;
}

type WindowsThis = EveThis & WindowsMembers;

const iso = (o: Opening) => ({ start: o.start.toISOString(), end: o.end.toISOString() });

const MaintenanceWindowsService: EveServiceSchema<WindowsThis> = {
	name: "maintenance-windows",
	mixins: [
		EveCollection({
			resource: "maintenance_windows",
			idPattern: OBJECT_ID,
			schema: {
				name: { type: "string", min: 1, max: 200 },
				targets: TARGETS_SCHEMA,
				functions: FUNCTIONS_SCHEMA,
				rrule: { type: "string", min: 1, max: 1000 },
				start: { type: "string", min: 1, max: 40 },
				timezone: { type: "string", min: 1, max: 100 },
				duration: { type: "string", min: 2, max: 40 },
				enabled: { type: "boolean", optional: true },
			},
			indexes: { enabled: {} },
		}),
	],

	actions: {
		/**
		 * May `fun` run on these hosts now, as far as the windows say? (internal: the run door). Answers the governed
		 * hosts that no window of theirs is open for now, and the first opening among those windows. A dry run is
		 * never governed. A window whose target cannot be evaluated refuses its function everywhere it might apply.
		 */
		check: {
			visibility: "public",
			params: {
				fun: { type: "string", max: 200 },
				arg: { type: "array", optional: true },
				kwarg: { type: "object", optional: true },
				targets: { type: "array", items: "string", max: 100_000 },
				at: { type: "date", optional: true, convert: true },
			},
			async handler(
				this: WindowsThis,
				ctx: Context<{ fun: string; arg?: unknown[]; kwarg?: Record<string, unknown>; targets: string[]; at?: Date }>,
			): Promise<WindowVerdict> {
				const { fun, arg, kwarg, targets } = ctx.params;
				if (isDryRun(fun, arg, kwarg)) return { refused: [], next: null };
				const windows = await this.governing(governedNames(fun, arg, kwarg));
				if (!windows.length) return { refused: [], next: null };
				const now = ctx.params.at ?? new Date();
				const run = new Set(targets);
				// Per governed host: is one of its windows open?
				const open = new Map<string, boolean>();
				const closedWindows: Doc[] = [];
				const memo: HostsMemo = new Map();
				for (const w of windows) {
					let hosts: Set<string>;
					try {
						hosts = await hostsOf(ctx, w.targets as Targets, memo);
					} catch (err) {
						throw new OutsideWindow(
							`the maintenance window '${w.name}' (${w._id}) governs ${fun} but its target cannot be evaluated now (${(err as Error).message}); nothing it may govern runs until an admin mends it`,
						);
					}
					const isOpen = openingAt(this.compiled(w), now) !== null;
					let touches = false;
					for (const h of hosts) {
						if (!run.has(h)) continue;
						touches = true;
						open.set(h, (open.get(h) ?? false) || isOpen);
					}
					if (touches && !isOpen) closedWindows.push(w);
				}
				const refused = [...open]
					.filter(([, ok]) => !ok)
					.map(([h]) => h)
					.sort();
				if (!refused.length) return { refused, next: null };
				let next: NextWindow | null = null;
				for (const w of closedWindows) {
					const [o] = nextOpenings(this.compiled(w), now, 1);
					if (o && (!next || o.start.toISOString() < next.start))
						next = { window: String(w._id), name: w.name, ...iso(o) };
				}
				return { refused, next };
			},
		},

		/** GET /hosts/{id}/maintenance_windows: the windows that govern the host, whether each is open, and its next openings (`?count=`, default 5). */
		ofHost: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: WindowsThis, ctx: Context<{ id: string; query?: unknown }>) {
				const count = this.countParam(ctx);
				const exists = await ctx.call<string[], { ids: string[] }>("hosts.exist", { ids: [ctx.params.id] });
				if (!exists.includes(ctx.params.id)) throw new NotFound(`host '${ctx.params.id.slice(0, 200)}' not found`);
				const now = new Date();
				const items: Doc[] = [];
				const memo: HostsMemo = new Map();
				for (const w of await this.store.find({ enabled: { $ne: false } }, { sort: [["name", 1]] })) {
					const hosts = await hostsOf(ctx, w.targets as Targets, memo).catch(() => null);
					if (hosts && !hosts.has(ctx.params.id)) continue;
					items.push({
						...this.openingView(w, now, count),
						...(hosts
							? {}
							: { error: "its target cannot be evaluated now: it refuses its functions on every host it may govern" }),
					});
				}
				return { host: ctx.params.id, _items: items };
			},
		},

		/** GET /maintenance_windows/{id}/preview: the window's next openings (`?count=`, default 5), and the one open now. */
		preview: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: WindowsThis, ctx: Context<{ id: string; query?: unknown }>) {
				const doc = await this.visibleItem(ctx.params.id);
				return this.openingView(doc, new Date(), this.countParam(ctx));
			},
		},
	},

	methods: {
		/** The window's timing, compiled once per version of the record. */
		compiled(this: WindowsThis, doc: Doc): CompiledWindow {
			const id = String(doc._id);
			// Keyed by the timing itself: two writes within one second share an _updated.
			const version = canonical([doc.rrule, doc.start, doc.timezone, doc.duration]);
			const hit = this.compiledCache.get(id);
			if (hit && hit.updated === version) return hit.window;
			const c = compileWindow({ rrule: doc.rrule, start: doc.start, timezone: doc.timezone, duration: doc.duration });
			// Checked on every write: a stored window that does not compile was written by hand; it governs, closed.
			const window = isCompiled(c)
				? c
				: compileWindow({ rrule: "FREQ=YEARLY;COUNT=1", start: "1970-01-01T00:00", timezone: "UTC", duration: "PT1M" });
			if (!isCompiled(window)) throw new Error("the closed window does not compile");
			if (this.compiledCache.size > 10_000) this.compiledCache.clear();
			this.compiledCache.set(id, { updated: version, window });
			return window;
		},

		/** The enabled windows whose functions include one of `names` (governedNames; null: every window). */
		async governing(this: WindowsThis, names: string[] | null): Promise<Doc[]> {
			const all = await this.store.find({ enabled: { $ne: false } });
			return all.filter(w => governs(w.functions ?? [], names));
		},

		countParam(this: WindowsThis, ctx: Context<{ query?: unknown }>): number {
			const raw = QueryArgs.from(ctx.params.query).get("count");
			const count = raw === undefined || raw === "" ? 5 : Number(raw);
			if (!Number.isInteger(count) || count < 1 || count > 100)
				throw new Malformed("count must be a whole number from 1 to 100");
			return count;
		},

		openingView(this: WindowsThis, doc: Doc, now: Date, count: number): Doc {
			const c = this.compiled(doc);
			const current = openingAt(c, now);
			return {
				_id: String(doc._id),
				name: doc.name,
				functions: doc.functions,
				timezone: doc.timezone,
				open: current ? iso(current) : null,
				next: nextOpenings(c, now, count, PREVIEW_HORIZON_MS).map(iso),
			};
		},

		async checkRules(
			this: WindowsThis,
			ctx: RestContext,
			doc: Doc,
			info: { op: string; existing?: Doc },
		): Promise<Issues | null> {
			const merged = { ...(info.existing ?? {}), ...doc };
			const timing = compileWindow({
				rrule: merged.rrule,
				start: merged.start,
				timezone: merged.timezone,
				duration: merged.duration,
			});
			if (!isCompiled(timing)) return timing;
			return targetsIssues(ctx, merged.targets, "targets", true);
		},
	},

	created(this: WindowsThis) {
		this.compiledCache = new Map();
	},
};

export default MaintenanceWindowsService;
