/**
 * Owns the `actions` collection: one record per host return of every job fleet-ctl started
 * (`_id` = jid + hostname, `args` with Salt's `__kwarg__`, `return` as text). Read-only over the API.
 */
import type { ServiceSchema } from "moleculer";
import { JobReturns } from "../mixins/job-returns.mixin";

const ActionsService: ServiceSchema = {
	name: "actions",
	mixins: [JobReturns("actions", { args: { type: "array", optional: true }, return: { type: "string", optional: true } })],
};

export default ActionsService;
