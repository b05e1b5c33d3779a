/**
 * Compound targets on the inventory (docs/targeting.md): `POST /api/targets/preview` answers which live hosts
 * an expression selects, evaluated here on the stored hosts (grains read only when a term needs them), with
 * the hosts it names that the fleet does not have. `hosts.resolveTarget` is the same resolution for the
 * services that run on a target (issue 21): what is previewed is what runs.
 */
import type { ActionSchema, Context } from "moleculer";
import type { HostsThis } from "./types";
import type { RestContext } from "../../mixins/eve-collection.mixin";
import { ErrorType, Invalid, isError, TargetUnevaluable } from "../../lib/errors";
import { compileSchema } from "../../lib/eve/validation";
import { TARGET_PREVIEW_BODY } from "../../lib/http/bodies";
import { compileTarget, groupRefs, TargetError, type TargetHost } from "../../lib/fleet/compound";
import { action, call } from "../../lib/contracts/call";

const checkPreviewBody = compileSchema(TARGET_PREVIEW_BODY, { wellFormed: true });

/** What a target resolves to. */
export interface Resolution {
	/** The live hosts it selects, sorted. */
	hosts: string[];
	/** Ids it names (L@ members, globs without a wildcard) that are no live host. */
	missing: string[];
}

/**
 * The hosts of every group an expression names with `F@<ref>` (by id, else by name; a name two groups share
 * must be given as an id), resolved as `POST /groups/{id}` resolves them (groups.hostnames), before compiling.
 */
async function groupMembers(ctx: Context, expression: string): Promise<(ref: string) => Set<string> | null> {
	const refs = groupRefs(expression);
	if (!refs.length) return () => null;
	const groups = await call(ctx, "groups.rules");
	const members = new Map<string, Set<string> | Error>();
	for (const ref of refs) {
		const named = groups.filter(g => g._id === ref);
		const matches = named.length ? named : groups.filter(g => g.name === ref);
		if (matches.length > 1)
			members.set(ref, new TargetError(`'F@${ref}': ${matches.length} groups are named '${ref}': give one's id`));
		else if (matches.length === 1)
			members.set(ref, new Set(await call(ctx, "groups.hostnames", { id: matches[0]._id })));
	}
	return ref => {
		const found = members.get(ref);
		if (found instanceof Error) throw found;
		return found ?? null;
	};
}

/** Why each `N@` name cannot select hosts: unknown to the nodegroups service, or a master's definition fleet-ctl cannot evaluate. */
async function nodegroupCheck(
	ctx: Context,
	expression: string,
): Promise<((name: string) => string | null) | undefined> {
	if (!expression.includes("N@")) return undefined;
	const known = await call(ctx, "nodegroups.known");
	return name =>
		Object.hasOwn(known, name)
			? known[name]
			: `no nodegroup is named '${name}' (the master's are read at each reconciliation; GET /api/nodegroups)`;
}

export const targetMethods = {
	/** The live hosts `expression` selects (throws TargetUnevaluable, a 400 with the reason, when it cannot be evaluated). */
	async targetHosts(this: HostsThis, ctx: Context, expression: string): Promise<Resolution> {
		let compiled: ReturnType<typeof compileTarget>;
		try {
			compiled = compileTarget(
				expression,
				{ group: await groupMembers(ctx, expression), nodegroup: await nodegroupCheck(ctx, expression) },
				true,
			);
		} catch (err) {
			if (err instanceof TargetError) throw new TargetUnevaluable(err.message);
			throw err;
		}
		const hosts: string[] = [];
		const live = new Set<string>();
		const fields = compiled.usesGrains ? ["nodegroups", "grain"] : ["nodegroups"];
		// The flag is always stored: an equality its index answers, no record matched against a filter.
		try {
			await this.store.scan({ _soft_deleted: false }, fields, d => {
				live.add(d._id);
				if (compiled.test(d as TargetHost)) hosts.push(d._id);
			});
		} catch (err) {
			// A target that would take more than its share of work on a host's grains (MAX_TARGET_STEPS_PER_HOST).
			if (err instanceof TargetError) throw new TargetUnevaluable(err.message);
			throw err;
		}
		return { hosts: hosts.sort(), missing: compiled.named.filter(id => !live.has(id)).sort() };
	},
};

export const targetActions: Record<string, ActionSchema<HostsThis>> = {
	/** POST /targets/preview `{"target": "<compound expression>"}`: the hosts it selects, their count, the named ones missing. */
	previewTarget: {
		params: { body: { type: "any", optional: true }, query: { type: "any", optional: true } },
		async handler(this: HostsThis, ctx: RestContext) {
			const body = (ctx.params.body ?? {}) as { target?: string };
			const issues = checkPreviewBody(body);
			if (issues) throw new Invalid(issues);
			const { hosts, missing } = await this.targetHosts(ctx, body.target as string);
			return { target: body.target, count: hosts.length, hosts, missing };
		},
	},

	/**
	 * The same resolution for a service that runs on a target (internal). With `field`, the target is a field of
	 * the caller's document: an expression that cannot be evaluated is that document's fault, a 422 on the field.
	 */
	resolveTarget: action("hosts.resolveTarget", {
		visibility: "public",
		async handler(this: HostsThis, ctx) {
			try {
				return await this.targetHosts(ctx, ctx.params.target);
			} catch (err) {
				if (ctx.params.field && isError(err, ErrorType.TargetUnevaluable))
					throw new TargetUnevaluable(String(err.data?.reason), ctx.params.field);
				throw err;
			}
		},
	}),
};
