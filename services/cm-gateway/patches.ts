/**
 * `POST /updates`: the patch files under CM_PATCH_PREFIX on the master's file server, read through runner
 * `salt.cmd` with `cp.get_file_str` and upserted into `updates`; progress in the `load_updates` job.
 */
import type { Context } from "moleculer";
import { batchesBySize } from "../../lib/fleet/batches";
import { UpstreamFailed } from "../../lib/errors";
import { SaltApiError } from "./salt-client";
import { trackJob, type JobHandle } from "./progress";
import { UPSERT_BATCH, eachLimited, type GatewayContext } from "./context";

export interface LoadResult {
	_status: "OK";
	loaded: number;
	created: number;
}

/**
 * The patch files among the file server's paths: `.sls` files under `prefix`, each with its sls name, as
 * `state.apply` takes it ("patches/fix1.sls" -> "patches.fix1"; "patches/web/init.sls" -> "patches.web"
 * unless "patches/web.sls" exists, which Salt prefers). Names with another "." cannot be given to
 * `state.apply` (Salt reads the dot as a directory): `skip` hears about them.
 */
export function patchPaths(
	paths: string[],
	prefix: string,
	skip: (path: string) => void = () => {},
): Array<{ path: string; name: string }> {
	const byName = new Map<string, { path: string; name: string; init: boolean }>();
	for (const path of paths) {
		if (!path.startsWith(prefix) || !path.endsWith(".sls")) continue;
		const parts = path.slice(0, -".sls".length).split("/");
		if (parts.some(p => p === "" || p.includes("."))) {
			skip(path);
			continue;
		}
		const init = parts.length > 1 && parts[parts.length - 1] === "init";
		if (init) parts.pop();
		const name = parts.join(".");
		const seen = byName.get(name);
		if (!seen || (seen.init && !init)) byName.set(name, { path, name, init });
	}
	return [...byName.values()].map(({ path, name }) => ({ path, name }));
}

export class Patches {
	constructor(private readonly gw: GatewayContext) {}

	/** Reads the patch files from the master and upserts them: {_status, loaded, created}. */
	async load(ctx: Context): Promise<LoadResult> {
		const job = await trackJob(this.gw.broker, "load_updates", { prefix: this.gw.config.cmPatchPrefix });
		try {
			const result = await this.read(ctx, job);
			await job.finish({ ...result });
			return result;
		} catch (err) {
			await job.fail(err);
			throw err;
		}
	}

	private async read(ctx: Context, job: JobHandle): Promise<LoadResult> {
		const { salt, config, logger } = this.gw;
		const listed = await salt.lowstate(
			{ client: "runner", fun: "fileserver.file_list", saltenv: "base" },
			{ safe: true },
		);
		if (!Array.isArray(listed) || listed.some(p => typeof p !== "string"))
			throw new SaltApiError(502, "malformed", "salt-api sent a malformed answer to fileserver.file_list");
		const paths = patchPaths(listed as string[], config.cmPatchPrefix, path =>
			logger.warn(`Skipping patch file '${path}': its name cannot be given to state.apply`),
		);

		const patches: Array<{ name: string; text: string }> = [];
		const unreadable: string[] = [];
		let read = 0;
		await eachLimited(paths, config.cmApiConcurrency, async ({ path, name }) => {
			const text = await this.readOne(path);
			if (text !== null) patches.push({ name, text });
			else unreadable.push(path);
			await job.progress(++read, paths.length);
		});

		patches.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
		let created = 0;
		for (const batch of batchesBySize(patches, UPSERT_BATCH)) {
			const res = await ctx.call<{ created: number }, { patches: typeof batch }>("updates.upsertMany", {
				patches: batch,
			});
			created += res.created;
		}
		// What could be read is kept, but a listed patch that could not be read is never a success.
		if (unreadable.length) {
			unreadable.sort();
			const names =
				unreadable.slice(0, 20).join(", ") + (unreadable.length > 20 ? `, … (${unreadable.length - 20} more)` : "");
			throw new UpstreamFailed(
				`the master listed ${paths.length} patch file(s) but sent ${unreadable.length} of them as no text: ${names}; ${patches.length} loaded (${created} new)`,
				{
					issues: { unreadable: unreadable.slice(0, 100) },
				},
			);
		}
		return { _status: "OK", loaded: patches.length, created };
	}

	/**
	 * One file's text, read through the master's file server: runner `salt.cmd` with `cp.get_file_str`
	 * (wheel `file_roots.read` reads only files directly in a file root: `[]` for `patches/x.sls` on Salt
	 * 3006). The eauth grant it needs is narrowed to that function and prefix (docs/salt.md). null when the
	 * master sends no text (the file is gone, or is not text).
	 */
	private async readOne(path: string): Promise<string | null> {
		let text: unknown;
		try {
			text = await this.gw.salt.lowstate(
				{ client: "runner", fun: "salt.cmd", arg: ["cp.get_file_str", `salt://${path}`], kwarg: { saltenv: "base" } },
				{ safe: true },
			);
		} catch (err) {
			if ((err as { kind?: string }).kind === "auth") {
				throw new SaltApiError(
					502,
					"auth",
					`the master refused to read '${path}' through runner salt.cmd cp.get_file_str: grant it to CM_API_USER in external_auth (docs/salt.md, "The API user and its permissions")`,
				);
			}
			throw err;
		}
		if (typeof text === "string") return text;
		this.gw.logger.warn(
			`Patch file '${path}': the master sent no text (${text === false ? "not found" : typeof text})`,
		);
		return null;
	}
}
