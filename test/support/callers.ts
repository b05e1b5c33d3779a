/** A suite's callers by name: tokens the admin makes, and requests made with them ("admin": the harness's admin token). */
import { request, withQuery } from "./http";

export function callers(api: () => string) {
	const tokens: Record<string, { id: string; secret: string }> = {};
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${api()}/${path}`, query);
	const as = (who: string, method: string, path: string, body?: unknown) =>
		request(method, url(path), { token: who === "admin" ? undefined : tokens[who].secret, body });
	/** A token of `role` (with `scope`) made by the admin, known as `name` from then on. */
	const newToken = async (name: string, role: string, scope?: Record<string, unknown>) => {
		const res = await request("POST", url("tokens"), { body: { name, role, ...(scope ? { scope } : {}) } });
		if (res.status !== 201) throw new Error(`token: ${res.status} ${res.text}`);
		tokens[name] = { id: res.body._id, secret: res.body.token };
	};
	return { tokens, url, as, newToken };
}
