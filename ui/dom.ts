/** Small DOM helpers: elements are built with textContent only, so no API value is ever parsed as HTML. */

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | ((ev: any) => void) | undefined | null>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Array<Child | Child[]>): HTMLElementTagNameMap[K] {
	const el = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs)) {
		if (v === undefined || v === null || v === false) continue;
		if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
		else if (k === "class") el.className = String(v);
		else if (v === true) el.setAttribute(k, "");
		else el.setAttribute(k, String(v));
	}
	for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(typeof c === "number" ? String(c) : c);
	return el;
}

export function clear(el: Element, ...children: Array<Child | Child[]>): void {
	el.replaceChildren();
	for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(typeof c === "number" ? String(c) : c);
}

export function pill(value: unknown): HTMLSpanElement {
	const text = value === undefined || value === null ? "–" : String(value);
	return h("span", { class: `pill ${text}` }, text);
}

/** A value for people: scalars as they are, lists joined, objects as key: value lines. */
export function show(value: unknown): string {
	if (value === undefined || value === null || value === "") return "–";
	if (Array.isArray(value)) return value.map(v => (typeof v === "object" ? JSON.stringify(v) : String(v))).join(", ") || "–";
	if (typeof value === "object") return Object.entries(value as Record<string, unknown>).map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : String(v)}`).join("\n") || "–";
	return String(value);
}

export function table(columns: string[], rows: Array<Array<Child | Child[]>>, attrs: Attrs = {}): HTMLTableElement {
	return h("table", attrs, h("thead", {}, h("tr", {}, columns.map(c => h("th", {}, c)))), h("tbody", {}, rows.map(r => h("tr", {}, r.map(c => h("td", {}, c))))));
}

export function toast(text: string): void {
	const box = document.getElementById("toasts");
	if (!box) return;
	const t = h("div", { class: "toast", role: "status" }, text);
	box.append(t);
	setTimeout(() => t.remove(), 6000);
}
