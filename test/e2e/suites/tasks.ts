/**
 * Scheduled tasks: `start` in as "YYYY-MM-DD HH:MM" and out as an HTTP-date, the defaults and the
 * scheduler's read-only fields, status moves through PATCH /tasks/{id}/{status}, PUT /tasks, delete.
 */
import type { Harness } from "../../support/harness";
import { request, withQuery, expectEveError } from "../../support/http";

const HTTP_DATE =
	/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const OBJECT_ID = /^[a-f0-9]{24}$/;
const DATETIME_ISSUE = "must be of datetime type (YYYY-MM-DD HH:MM in UTC, or an HTTP-date)";

export default function tasks(h: () => Harness): void {
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${path}`, query);
	const base = {
		name: "tk-base",
		fun: "state.apply",
		kwarg: { mods: "patch-1", pillar: { reboot: false } },
		start: "2030-01-02 03:04",
		tgt: ["tk-web-1", "tk-web-2"],
	};
	const create = async (body: Record<string, unknown>): Promise<string> => {
		const res = await request("POST", url("tasks"), { body });
		expect(res.status).toBe(201);
		return res.body._id;
	};

	describe("creating", () => {
		it("answers 201 with Eve's write shape and Location", async () => {
			const res = await request("POST", url("tasks"), { body: { ...base, name: "tk-create" } });
			expect(res.status).toBe(201);
			expect(Object.keys(res.body)).toEqual(["_updated", "_created", "_id", "_links", "_status"]);
			expect(res.body._id).toMatch(OBJECT_ID);
			expect(res.body._links).toEqual({ self: { title: "Task", href: `tasks/${res.body._id}` } });
			expect(res.body._status).toBe("OK");
			expect(res.headers.get("location")).toBe(`${h().api}/tasks/${res.body._id}`);
		});

		it("shows start as an HTTP-date, next equal to start, and the defaults", async () => {
			const id = await create({ name: "tk-defaults", fun: "test.ping", start: "2030-01-02 03:04", tgt: ["tk-web-1"] });
			const res = await request("GET", url(`tasks/${id}`));
			expect(res.status).toBe(200);
			expect(res.body).toEqual({
				cm_client: "local_async",
				name: "tk-defaults",
				fun: "test.ping",
				kwarg: {},
				start: "Wed, 02 Jan 2030 03:04:00 GMT",
				status: "scheduled",
				tgt: ["tk-web-1"],
				interval: 0,
				next: "Wed, 02 Jan 2030 03:04:00 GMT",
				count_of_execution: 0,
				// the token that created it (the harness's bootstrap admin token)
				owner: expect.stringMatching(/^[a-f0-9]{24}$/),
				_updated: expect.stringMatching(HTTP_DATE),
				_created: expect.stringMatching(HTTP_DATE),
				_id: id,
				_links: {
					self: { title: "Task", href: `tasks/${id}` },
					parent: { title: "home", href: "/" },
					collection: { title: "tasks", href: "tasks" },
				},
			});
		});

		it("keeps what was given: client, kwarg, status, interval, end, and an HTTP-date start", async () => {
			const id = await create({
				...base,
				name: "tk-given",
				cm_client: "local",
				status: "paused",
				interval: 3600,
				start: "Sat, 05 Jan 2030 06:07:00 GMT",
				end: "2030-02-01 00:00",
			});
			const res = await request("GET", url(`tasks/${id}`));
			expect(res.body).toMatchObject({
				cm_client: "local",
				kwarg: base.kwarg,
				status: "paused",
				interval: 3600,
				start: "Sat, 05 Jan 2030 06:07:00 GMT",
				next: "Sat, 05 Jan 2030 06:07:00 GMT",
				end: "Fri, 01 Feb 2030 00:00:00 GMT",
				count_of_execution: 0,
			});
			const listed = await request("GET", url("tasks", { where: { name: "tk-given" } }));
			expect(listed.body._meta.total).toBe(1);
			expect(listed.body._items[0]).toMatchObject({
				_id: id,
				start: "Sat, 05 Jan 2030 06:07:00 GMT",
				end: "Fri, 01 Feb 2030 00:00:00 GMT",
			});
			expect(listed.body._items[0]._links).toEqual({ self: { title: "Task", href: `tasks/${id}` } });
			const byStart = await request(
				"GET",
				url("tasks", {
					where: { name: { $in: ["tk-given", "tk-defaults"] }, start: { $gt: "Thu, 03 Jan 2030 00:00:00 GMT" } },
				}),
			);
			expect(byStart.body._items.map((t: any) => t.name)).toEqual(["tk-given"]);
		});

		it("rejects a start that is not YYYY-MM-DD HH:MM or an HTTP-date", async () => {
			for (const start of [
				"2030-13-01 00:00",
				"2030-02-30 10:00",
				"2030-01-02 24:00",
				"tomorrow",
				"02.01.2030 03:04",
				"",
				5,
				null,
				true,
			]) {
				const err = expectEveError(
					await request("POST", url("tasks"), { body: { ...base, name: "tk-bad-start", start } }),
					422,
				);
				expect(err._issues).toEqual({ start: DATETIME_ISSUE });
			}
			const missing = expectEveError(
				await request("POST", url("tasks"), { body: { name: "tk-bad-start", fun: "test.ping", tgt: ["x"] } }),
				422,
			);
			expect(missing._issues).toEqual({ start: "required field" });
			const badEnd = expectEveError(
				await request("POST", url("tasks"), { body: { ...base, name: "tk-bad-start", end: "never" } }),
				422,
			);
			expect(badEnd._issues).toEqual({ end: DATETIME_ISSUE });
			expect((await request("GET", url("tasks", { where: { name: "tk-bad-start" } }))).body._meta.total).toBe(0);
		});

		it("rejects an end that is not after start", async () => {
			for (const end of ["2030-01-01 00:00", "2030-01-02 03:04"]) {
				const err = expectEveError(
					await request("POST", url("tasks"), { body: { ...base, name: "tk-bad-end", end } }),
					422,
				);
				expect(err._issues).toEqual({ end: "must be later than start" });
			}
			expect((await request("GET", url("tasks", { where: { name: "tk-bad-end" } }))).body._meta.total).toBe(0);
		});

		it("rejects a start or end whose year is outside 1970–9999 or that names another date (Date reads year 0000 as 1900)", async () => {
			const cases: Array<[string, string, string]> = [
				["start", "0000-01-01 00:00", "must be in the years 1970 to 9999 (0000 given)"],
				["start", "0070-06-01 12:00", "must be in the years 1970 to 9999 (0070 given)"],
				["start", "1969-12-31 23:59", "must be in the years 1970 to 9999 (1969 given)"],
				["start", "Sat, 01 Jan 0000 00:00:00 GMT", "must be in the years 1970 to 9999 (0000 given)"],
				[
					"start",
					"Mon, 01 Jan 2030 00:00:00 GMT",
					"names another date than the one given: 01 Jan 2030 is a Tuesday, not Mon",
				],
				["end", "0000-01-01 00:00", "must be in the years 1970 to 9999 (0000 given)"],
				["end", "10000-01-01 00:00", DATETIME_ISSUE],
			];
			for (const [field, value, issue] of cases) {
				const err = expectEveError(
					await request("POST", url("tasks"), { body: { ...base, name: "tk-bad-year", [field]: value } }),
					422,
				);
				expect(err._issues).toEqual({ [field]: issue });
			}
			expect((await request("GET", url("tasks", { where: { name: "tk-bad-year" } }))).body._meta.total).toBe(0);
			// The bounds themselves are fine.
			await create({
				...base,
				name: "tk-year-bounds",
				start: "1970-01-01 00:00",
				end: "9999-12-31 23:59",
				interval: 3600,
			});
		});

		it("rejects a schedule that can never fire: a cron no date matches, or an end before the first due time", async () => {
			for (const cron of ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "15 10 30-31 feb *"]) {
				const err = expectEveError(
					await request("POST", url("tasks"), { body: { ...base, name: "tk-never", cron } }),
					422,
				);
				expect(err._issues).toEqual({ cron: expect.stringMatching(/^never due: no date matches day /) });
			}
			const feb30 = expectEveError(
				await request("POST", url("tasks"), { body: { ...base, name: "tk-never", cron: "0 0 30 2 *" } }),
				422,
			);
			expect(feb30._issues).toEqual({ cron: "never due: no date matches day 30 of feb" });
			// Due only on Feb 29 from 2030 on: first in 2032, after this end.
			const late = expectEveError(
				await request("POST", url("tasks"), {
					body: { ...base, name: "tk-never", cron: "0 0 29 2 *", end: "2031-12-31 00:00" },
				}),
				422,
			);
			expect(late._issues).toEqual({
				end: "the task would never run: its first due time (Sun, 29 Feb 2032 00:00:00 GMT) is after end",
			});
			expect((await request("GET", url("tasks", { where: { name: "tk-never" } }))).body._meta.total).toBe(0);
			// Feb 29 alone fires (in leap years), and a one-shot in the past is kept (it runs once, as a misfire).
			const leap = await create({ ...base, name: "tk-leap", cron: "0 0 29 2 *" });
			expect((await request("GET", url(`tasks/${leap}`))).body.next).toBe("Sun, 29 Feb 2032 00:00:00 GMT");
			await create({ ...base, name: "tk-past", start: "2001-01-01 00:00", status: "paused" });
		});

		it("requires a non-empty tgt, a name and a function", async () => {
			const { tgt: _tgt, ...noTgt } = base;
			expect(expectEveError(await request("POST", url("tasks"), { body: noTgt }), 422)._issues).toEqual({
				tgt: "required field",
			});
			expect(expectEveError(await request("POST", url("tasks"), { body: { ...base, tgt: [] } }), 422)._issues).toEqual({
				tgt: "min length is 1",
			});
			expect(
				expectEveError(await request("POST", url("tasks"), { body: { ...base, tgt: "tk-web-1" } }), 422)._issues,
			).toEqual({ tgt: "must be of list type" });
			expect(
				expectEveError(await request("POST", url("tasks"), { body: { ...base, tgt: [""] } }), 422)._issues,
			).toEqual({ tgt: { "0": "min length is 1" } });
			const err = expectEveError(
				await request("POST", url("tasks"), { body: { start: base.start, tgt: base.tgt } }),
				422,
			);
			expect(err._issues).toEqual({ name: "required field", fun: "required field" });
			expect(err._error.message).toBe("Insertion failure: 1 document(s) contain(s) error(s)");
		});

		it("takes a compound target instead of (or with) tgt, shows it back, and refuses one that cannot be evaluated on the field", async () => {
			const { tgt: _tgt, ...noTgt } = base;
			const id = await create({ ...noTgt, name: "tk-compound", target: "tk-web-* and not G@os:windows" });
			expect((await request("GET", url(`tasks/${id}`))).body).toMatchObject({
				name: "tk-compound",
				target: "tk-web-* and not G@os:windows",
			});
			expect((await request("GET", url(`tasks/${id}`))).body.tgt).toBeUndefined();
			expect(
				expectEveError(await request("POST", url("tasks"), { body: { ...noTgt, target: "tk-web-* tk-db-*" } }), 422)
					._issues,
			).toEqual({ target: expect.stringMatching(/without 'and' or 'or'/) });
			expect(
				expectEveError(await request("POST", url("tasks"), { body: { ...noTgt, target: "" } }), 422)._issues,
			).toEqual({ target: expect.any(String) });
			expect(
				expectEveError(await request("POST", url("tasks"), { body: { ...noTgt, target: ["tk-web-1"] } }), 422)._issues,
			).toEqual({ target: expect.any(String) });
		});

		it("rejects the scheduler's fields, unknown fields and values out of range", async () => {
			for (const [field, value] of [
				["next", "2030-01-02 03:04"],
				["count_of_execution", 0],
			] as const) {
				const err = expectEveError(await request("POST", url("tasks"), { body: { ...base, [field]: value } }), 422);
				expect(err._issues).toEqual({ [field]: "field is read-only" });
			}
			expect(expectEveError(await request("POST", url("tasks"), { body: { ...base, bogus: 1 } }), 422)._issues).toEqual(
				{ bogus: "unknown field" },
			);
			expect(
				expectEveError(await request("POST", url("tasks"), { body: { ...base, _created: "x" } }), 422)._issues,
			).toEqual({ _created: "unknown field" });
			const status = expectEveError(
				await request("POST", url("tasks"), { body: { ...base, status: "finished" } }),
				422,
			);
			expect(status._issues.status).toMatch(/^unallowed value/);
			const client = expectEveError(await request("POST", url("tasks"), { body: { ...base, cm_client: "ssh" } }), 422);
			expect(client._issues.cm_client).toMatch(/^unallowed value/);
			expect(
				expectEveError(await request("POST", url("tasks"), { body: { ...base, interval: -1 } }), 422)._issues,
			).toEqual({ interval: "min value is 0" });
			expect(
				expectEveError(await request("POST", url("tasks"), { body: { ...base, kwarg: [1] } }), 422)._issues,
			).toEqual({ kwarg: "must be of dict type" });
		});
	});

	describe("PATCH /tasks/{id}/{status}", () => {
		let id: string;
		beforeAll(async () => {
			id = await create({ ...base, name: "tk-status" });
		});

		it("pauses a scheduled task and schedules it again", async () => {
			const paused = await request("PATCH", url(`tasks/${id}/paused`));
			expect(paused.status).toBe(200);
			expect(paused.body).toEqual({
				_updated: expect.stringMatching(HTTP_DATE),
				_created: expect.stringMatching(HTTP_DATE),
				_id: id,
				_links: { self: { title: "Task", href: `tasks/${id}` } },
				_status: "OK",
			});
			expect((await request("GET", url(`tasks/${id}`))).body.status).toBe("paused");
			expect((await request("PATCH", url(`tasks/${id}/paused`))).status).toBe(200);
			expect((await request("GET", url(`tasks/${id}`))).body.status).toBe("paused");

			expect((await request("PATCH", url(`tasks/${id}/scheduled`))).status).toBe(200);
			const item = await request("GET", url(`tasks/${id}`));
			expect(item.body).toMatchObject({
				status: "scheduled",
				name: "tk-status",
				tgt: base.tgt,
				kwarg: base.kwarg,
				next: "Wed, 02 Jan 2030 03:04:00 GMT",
			});
		});

		it("refuses a status that is not one, and a move a client may not make", async () => {
			const bogus = expectEveError(await request("PATCH", url(`tasks/${id}/bogus`)), 422);
			expect(Object.keys(bogus._issues)).toEqual(["status"]);
			const finished = expectEveError(await request("PATCH", url(`tasks/${id}/finished`)), 422);
			expect(Object.keys(finished._issues)).toEqual(["status"]);
			expect((await request("GET", url(`tasks/${id}`))).body.status).toBe("scheduled");
		});

		it("answers 405 without the status segment, and 404 for an unknown task", async () => {
			expectEveError(await request("PATCH", url(`tasks/${id}`), { body: { status: "paused" } }), 405);
			expectEveError(await request("PATCH", url("tasks/0123456789abcdef0123ffff/paused")), 404);
			expectEveError(await request("PATCH", url("tasks/not-a-task/paused")), 404);
		});
	});

	describe("PUT /tasks", () => {
		it("drops the listed targets with tgt: null, keeping the compound target, and refuses a task left with neither", async () => {
			const id = await create({ ...base, name: "tk-put-null" });
			expect((await request("PUT", url("tasks"), { body: { _id: id, target: "tk-web-*", tgt: null } })).status).toBe(
				200,
			);
			const item = (await request("GET", url(`tasks/${id}`))).body;
			expect(item.target).toBe("tk-web-*");
			expect(item.tgt ?? null).toBeNull();
			expect(
				expectEveError(await request("PUT", url("tasks"), { body: { _id: id, target: null } }), 422)._issues,
			).toEqual({ tgt: "required field" });
			expect((await request("PUT", url("tasks"), { body: { _id: id, tgt: ["tk-web-1"], target: null } })).status).toBe(
				200,
			);
			const after = (await request("GET", url(`tasks/${id}`))).body;
			expect(after.tgt).toEqual(["tk-web-1"]);
			expect(after.target ?? null).toBeNull();
		});

		it("replaces the fields given in the task named by _id, objects wholesale", async () => {
			const id = await create({ ...base, name: "tk-put" });
			const res = await request("PUT", url("tasks"), {
				body: { _id: id, tgt: ["tk-db-1"], kwarg: { mods: "patch-2" } },
			});
			expect(res.status).toBe(200);
			expect(res.body).toEqual({
				_updated: expect.stringMatching(HTTP_DATE),
				_created: expect.stringMatching(HTTP_DATE),
				_id: id,
				_links: { self: { title: "Task", href: `tasks/${id}` } },
				_status: "OK",
			});
			const item = await request("GET", url(`tasks/${id}`));
			expect(item.body).toMatchObject({
				name: "tk-put",
				fun: "state.apply",
				tgt: ["tk-db-1"],
				status: "scheduled",
				start: "Wed, 02 Jan 2030 03:04:00 GMT",
			});
			expect(item.body.kwarg).toEqual({ mods: "patch-2" });
		});

		it("moves next with start while the task has not run", async () => {
			const id = await create({ ...base, name: "tk-put-start" });
			expect((await request("PUT", url("tasks"), { body: { _id: id, start: "2031-06-07 08:09" } })).status).toBe(200);
			const item = await request("GET", url(`tasks/${id}`));
			expect(item.body).toMatchObject({
				start: "Sat, 07 Jun 2031 08:09:00 GMT",
				next: "Sat, 07 Jun 2031 08:09:00 GMT",
				count_of_execution: 0,
			});
			const err = expectEveError(
				await request("PUT", url("tasks"), { body: { _id: id, end: "2031-06-07 08:00" } }),
				422,
			);
			expect(err._issues).toEqual({ end: "must be later than start" });
		});

		it("validates what it replaces", async () => {
			const id = await create({ ...base, name: "tk-put-bad" });
			expect(expectEveError(await request("PUT", url("tasks"), { body: { _id: id, tgt: [] } }), 422)._issues).toEqual({
				tgt: "min length is 1",
			});
			expect(expectEveError(await request("PUT", url("tasks"), { body: { _id: id, bogus: 1 } }), 422)._issues).toEqual({
				bogus: "unknown field",
			});
			expect(
				expectEveError(await request("PUT", url("tasks"), { body: { _id: id, count_of_execution: 3 } }), 422)._issues,
			).toEqual({ count_of_execution: "field is read-only" });
			expect(
				expectEveError(await request("PUT", url("tasks"), { body: { _id: id, start: "soon" } }), 422)._issues,
			).toEqual({ start: DATETIME_ISSUE });
			expect(
				Object.keys(
					expectEveError(await request("PUT", url("tasks"), { body: { _id: id, status: "paused" } }), 422)._issues,
				),
			).toEqual(["status"]);
			const item = await request("GET", url(`tasks/${id}`));
			expect(item.body).toMatchObject({ tgt: base.tgt, status: "scheduled", count_of_execution: 0 });
		});

		it("refuses a change that leaves a schedule that can never fire, or a start in another year range", async () => {
			const id = await create({ ...base, name: "tk-put-never", cron: "0 12 * * *" });
			const cron = expectEveError(await request("PUT", url("tasks"), { body: { _id: id, cron: "0 0 30 2 *" } }), 422);
			expect(cron._issues).toEqual({ cron: "never due: no date matches day 30 of feb" });
			const end = expectEveError(
				await request("PUT", url("tasks"), { body: { _id: id, cron: "0 0 1 6 *", end: "2030-05-01 00:00" } }),
				422,
			);
			expect(end._issues).toEqual({
				end: "the task would never run: its first due time (Sat, 01 Jun 2030 00:00:00 GMT) is after end",
			});
			const start = expectEveError(
				await request("PUT", url("tasks"), { body: { _id: id, start: "0000-01-01 00:00" } }),
				422,
			);
			expect(start._issues).toEqual({ start: "must be in the years 1970 to 9999 (0000 given)" });
			expect((await request("GET", url(`tasks/${id}`))).body).toMatchObject({
				cron: "0 12 * * *",
				start: "Wed, 02 Jan 2030 03:04:00 GMT",
				next: "Wed, 02 Jan 2030 12:00:00 GMT",
			});
		});

		it("needs an _id, and answers 404 for one that names no task", async () => {
			const err = expectEveError(await request("PUT", url("tasks"), { body: { tgt: ["x"] } }), 422);
			expect(err._issues).toEqual({ _id: "required field" });
			expectEveError(
				await request("PUT", url("tasks"), { body: { _id: "0123456789abcdef0123ffff", tgt: ["x"] } }),
				404,
			);
			expectEveError(await request("PUT", url("tasks"), { body: { _id: "nope", tgt: ["x"] } }), 404);
			expectEveError(await request("PUT", url("tasks"), { body: [{ tgt: ["x"] }] }), 400);
		});
	});

	describe("POST /tasks/preview (a schedule not saved yet)", () => {
		it("answers the next due times of the schedule as written, from its start, and saves nothing", async () => {
			const before = (await request("GET", url("tasks", { max_results: 1 }))).body._meta.total;
			const res = await request("POST", url("tasks/preview", { count: 3 }), {
				body: { start: "2030-01-02 03:04", interval: 5400 },
			});
			expect(res.status).toBe(200);
			expect(res.body).toEqual({
				next: ["Wed, 02 Jan 2030 03:04:00 GMT", "Wed, 02 Jan 2030 04:34:00 GMT", "Wed, 02 Jan 2030 06:04:00 GMT"],
			});
			// A cron schedule in a time zone: 09:00 in Paris is 08:00 UTC in winter.
			const cron = await request("POST", url("tasks/preview", { count: 2 }), {
				body: { start: "2030-01-02 00:00", cron: "0 9 * * 1-5", timezone: "Europe/Paris" },
			});
			expect(cron.body.next).toEqual(["Wed, 02 Jan 2030 08:00:00 GMT", "Thu, 03 Jan 2030 08:00:00 GMT"]);
			// A one-shot task runs once; the fields saving needs besides the schedule are not asked for.
			expect(
				(await request("POST", url("tasks/preview"), { body: { start: "2030-01-02 03:04", name: "" } })).body,
			).toEqual({ next: ["Wed, 02 Jan 2030 03:04:00 GMT"] });
			expect((await request("GET", url("tasks", { max_results: 1 }))).body._meta.total).toBe(before);
		});

		it("refuses a schedule as creating the task would: the same 422 issues, and a bad count or body is a 400", async () => {
			expect(
				expectEveError(await request("POST", url("tasks/preview"), { body: { start: "tomorrow" } }), 422)._issues,
			).toEqual({ start: DATETIME_ISSUE });
			expect(
				expectEveError(
					await request("POST", url("tasks/preview"), {
						body: { start: "2030-01-02 03:04", interval: 60, cron: "* * * * *" },
					}),
					422,
				)._issues,
			).toEqual({ cron: "give either cron or interval, not both" });
			expect(
				expectEveError(await request("POST", url("tasks/preview"), { body: { interval: 60 } }), 422)._issues,
			).toEqual({ start: "required field" });
			expectEveError(
				await request("POST", url("tasks/preview", { count: 0 }), { body: { start: "2030-01-02 03:04" } }),
				400,
			);
			expectEveError(await request("POST", url("tasks/preview"), { body: [1] }), 400);
		});
	});

	describe("DELETE /tasks/{id}", () => {
		it("deletes with 204, then the task is gone (a second DELETE is a 404, as for an unknown or malformed id)", async () => {
			const id = await create({ ...base, name: "tk-delete" });
			const del = await request("DELETE", url(`tasks/${id}`));
			expect(del.status).toBe(204);
			expect(del.text).toBe("");
			expectEveError(await request("GET", url(`tasks/${id}`)), 404);
			expect((await request("GET", url("tasks", { where: { name: "tk-delete" } }))).body._meta.total).toBe(0);
			expectEveError(await request("DELETE", url(`tasks/${id}`)), 404);
			expectEveError(await request("DELETE", url("tasks/0123456789abcdef0123ffff")), 404);
			expectEveError(await request("DELETE", url("tasks/nope")), 404);
			expectEveError(await request("PATCH", url(`tasks/${id}/paused`)), 404);
		});

		it("has no collection DELETE", async () => {
			expectEveError(await request("DELETE", url("tasks")), 405);
		});
	});
}
