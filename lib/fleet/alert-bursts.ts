/**
 * Alerts that come in bursts (a master restart takes a thousand hosts down at once; a check finds the same drift
 * on a whole rack): more alerts of one of the bursty types than `burst` at once become one summary alert of that
 * type, `{count, hostnames}` (the first 100). Other alerts pass as they are.
 */

export interface AlertDraft {
	type: string;
	level: "info" | "warning" | "error";
	payload: Record<string, unknown>;
}

export function summarizeBursts(alerts: AlertDraft[], bursty: Set<string>, burst: number): AlertDraft[] {
	const out: AlertDraft[] = [];
	const byType = new Map<string, AlertDraft[]>();
	for (const a of alerts) {
		if (!bursty.has(a.type)) out.push(a);
		else byType.set(a.type, [...(byType.get(a.type) ?? []), a]);
	}
	for (const [type, list] of byType) {
		if (list.length <= burst) out.push(...list);
		else
			out.push({
				type,
				level: list[0].level,
				payload: { count: list.length, hostnames: list.slice(0, 100).map(a => a.payload.hostname) },
			});
	}
	return out;
}
