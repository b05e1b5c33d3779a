/**
 * Owns the `failed_patches` collection: a patch run (`state.apply`) whose return had a failing step,
 * one record per host, with every step. Read-only over the API.
 */
import type { ServiceSchema } from "moleculer";
import { JobReturns } from "../mixins/job-returns.mixin";

const FailedPatchesService: ServiceSchema = {
	name: "failed-patches",
	mixins: [
		JobReturns("failed_patches", {
			patch: { type: "string", optional: true },
			return: { type: "array", items: "object", optional: true },
		}),
	],
};

export default FailedPatchesService;
