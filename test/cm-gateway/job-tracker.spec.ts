/**
 * The cm-gateway's job tracker (services/cm-gateway/job-tracker.ts): each host's return of a job is taken once, whichever
 * source brings it (event stream, job poll) and however often the job is tracked (resumed, adopted).
 */
import { JobTracker } from "../../services/cm-gateway/job-tracker";

describe("job tracker", () => {
	const JID = "20240101000000000001";

	it("takes a host's return once, from whichever source brings it first", () => {
		const t = new JobTracker();
		t.track(JID, "test.ping", [], ["a", "b"], 60_000);
		expect(t.take(JID, "a", true)).toMatchObject({ jid: JID, host: "a", state: "finished", raw: true });
		expect(t.take(JID, "a", true)).toBeNull();
		expect(t.waitsFor(JID, "b")).toBe(true);
	});

	it("keeps the answered hosts answered when a job it already waits for is tracked again", () => {
		const t = new JobTracker();
		t.track(JID, "test.ping", [], ["a", "b"], 60_000);
		expect(t.take(JID, "a", true)).not.toBeNull();
		// A resume (or an adoption) of the same job in this process.
		expect(t.track(JID, "test.ping", [], ["a", "b"], 60_000)).toEqual([]);
		expect(t.take(JID, "a", true)).toBeNull();
		expect(t.take(JID, "b", true)).toMatchObject({ host: "b" });
		expect(t.size).toBe(0);
	});

	it("hands over the returns that arrived before the job was tracked", () => {
		const t = new JobTracker();
		t.keepEarly(JID, "a", "early");
		expect(t.track(JID, "test.ping", [], ["a", "b"], 60_000).map(r => [r.host, r.raw])).toEqual([["a", "early"]]);
		expect(t.take(JID, "a", "again")).toBeNull();
	});
});
