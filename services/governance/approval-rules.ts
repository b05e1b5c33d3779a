/**
 * The rules of an approval request (approvals.service.ts; docs/security.md, "Approvals"), pure: the digest of what a
 * request runs, whether a grant covers a run, until when a request is live, who may vote on it, and what the votes
 * make of it.
 */
import { Conflict, Forbidden } from "../../lib/errors";
import { canonicalDigest } from "../../lib/eve/etag";
import type { RunBody } from "../../lib/http/bodies";
import type { Doc } from "../../lib/storage/store";
import type { MatchedPolicy } from "./scope";

/** The Salt call a request holds, exactly as it will run. */
export type HeldCall = RunBody;

/** A vote's decision, by the path's word (`/approve`, `/reject`). */
export const DECISIONS: Readonly<Record<string, "approved" | "rejected">> = { approve: "approved", reject: "rejected" };

/** The digest of what an ad-hoc request runs: its call, its hosts (in any order) and its target. */
export function callDigest(call: HeldCall, hosts: string[], target?: string): string {
	return canonicalDigest({ call, hosts: [...hosts].sort(), target: target ?? null });
}

/**
 * Whether the request `doc` (the grant a run carries) covers the run: it is being carried out (`running`), for
 * exactly this call on these hosts (its digest, with its own target), as its requester's token.
 */
export function grantCovers(doc: Doc | null, call: HeldCall, hosts: string[], token: string): boolean {
	return (
		doc?.status === "running" && doc.digest === callDigest(call, hosts, doc.target) && doc.requester?.token === token
	);
}

/** Whether a pending request still holds its run at `now` (ms): before its expiry. */
export function stillPending(doc: Doc | null, now: number): doc is Doc {
	return doc !== null && new Date(doc.expires).getTime() > now;
}

/** When a request made at `now` expires: after the shortest `expires_after` (seconds) of its policies. */
export function expiryOf(policies: readonly MatchedPolicy[], now: Date): Date {
	return new Date(now.getTime() + Math.min(...policies.map(p => p.expires_after)) * 1000);
}

/** Who votes: their token, name, role and principal (every token of one principal is the same voter). */
export interface Voter {
	id: string;
	name: string;
	role: string;
	principal: string;
}

/** A vote as a request keeps it. */
export interface Vote {
	decision: "approved" | "rejected";
	role: string;
	identity: string;
}

/**
 * Why `voter` may not vote on the pending request `doc`, or null: its requester (any token of the requester's
 * principal, or the requesting token itself) may not decide it (403); a principal votes once (409); only the roles
 * its policies name count (403, naming them).
 */
export function voteRefusal(doc: Doc, voter: Voter): Forbidden | Conflict | null {
	if (voter.principal === doc.requester.identity || voter.id === doc.requester.token)
		return new Forbidden("the requester of a run cannot approve or reject it: another approver must");
	if ((doc.votes as Vote[]).some(v => v.identity === voter.principal))
		return new Conflict(`${voter.name} has already voted on this request`);
	const policies = doc.policies as MatchedPolicy[];
	if (!policies.some(p => p.roles.includes(voter.role)))
		return new Forbidden(
			`the role ${voter.role} cannot decide this request: its policies take approvers of the roles ${[...new Set(policies.flatMap(p => p.roles))].join(", ")}`,
		);
	return null;
}

/** A request's status after `votes` (the last one just cast): rejected by any rejection, approved once every policy has its count of approvals from its roles. */
export function statusAfter(
	policies: readonly MatchedPolicy[],
	votes: readonly Vote[],
): "approved" | "rejected" | "pending" {
	if (votes.some(v => v.decision === "rejected")) return "rejected";
	const complete = policies.every(
		p => votes.filter(v => v.decision === "approved" && p.roles.includes(v.role)).length >= p.count,
	);
	return complete ? "approved" : "pending";
}
