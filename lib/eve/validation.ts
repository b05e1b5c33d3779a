/**
 * fastest-validator schemas checked with Eve's (Cerberus') vocabulary: failures become `_issues`
 * such as {"name": "required field", "bogus": "unknown field", "info": {"regex": "must be of string type"}}.
 */
import Validator, { type ValidationError, type ValidationSchema, type ValidationRuleObject } from "fastest-validator";
import type { Issues } from "./errors";

const validator = new Validator({ useNewCustomCheckerFunction: true });

const TYPE_NAMES: Record<string, string> = {
	string: "string",
	number: "number",
	numberInteger: "integer",
	boolean: "boolean",
	object: "dict",
	array: "list",
	date: "datetime",
	record: "dict",
};

function splitPath(field: string | undefined): string[] {
	if (!field) return [];
	return field
		.replace(/\[(\d+)\]/g, ".$1")
		.split(".")
		.filter(Boolean);
}

function valueAt(doc: unknown, path: string[]): unknown {
	let cur: unknown = doc;
	for (const p of path) {
		if (cur == null || typeof cur !== "object") return undefined;
		cur = (cur as Record<string, unknown>)[p];
	}
	return cur;
}

function describe(err: ValidationError, doc: unknown, path: string[]): string {
	if (err.type === "required") return valueAt(doc, path) === null ? "null value not allowed" : "required field";
	if (TYPE_NAMES[err.type]) return `must be of ${TYPE_NAMES[err.type]} type`;
	switch (err.type) {
		case "enumValue":
			return `unallowed value ${JSON.stringify(err.actual)}`;
		case "stringMax":
		case "arrayMax":
			return `max length is ${err.expected}`;
		case "stringMin":
		case "arrayMin":
			return `min length is ${err.expected}`;
		case "stringEmpty":
		case "arrayEmpty":
			return "empty values not allowed";
		case "numberMin":
			return `min value is ${err.expected}`;
		case "numberMax":
			return `max value is ${err.expected}`;
		case "stringPattern":
			return `value does not match regex '${err.expected}'`;
		case "forbidden":
			return "field is read-only";
		default:
			return err.message ?? "invalid value";
	}
}

function addIssue(issues: Issues, path: string[], message: string): void {
	if (path.length === 0) path = ["_root"];
	let node = issues as Record<string, unknown>;
	for (const p of path.slice(0, -1)) {
		const existing = node[p];
		if (existing == null || typeof existing !== "object" || Array.isArray(existing)) node[p] = {};
		node = node[p] as Record<string, unknown>;
	}
	const leaf = path[path.length - 1];
	const prev = node[leaf];
	if (prev == null) node[leaf] = message;
	else if (Array.isArray(prev)) prev.push(message);
	else if (typeof prev === "string") node[leaf] = [prev, message];
}

export function toIssues(errors: ValidationError[], doc: unknown): Issues {
	const issues: Issues = {};
	for (const err of errors) {
		const path = splitPath(err.field);
		if (err.type === "objectStrict") {
			for (const key of String(err.actual).split(", ")) addIssue(issues, [...path, key], "unknown field");
		} else {
			addIssue(issues, path, describe(err, doc, path));
		}
	}
	return issues;
}

export type Check = (doc: unknown) => Issues | null;

/** Compiles a record schema into a checker that returns Eve issues, or null when the document is valid. */
export function compileSchema(schema: ValidationSchema): Check {
	const check = validator.compile({ $$strict: true, ...schema }) as (v: unknown) => true | ValidationError[];
	return doc => {
		if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return { _root: "must be of dict type" };
		const result = check(doc);
		return result === true ? null : toIssues(result, doc);
	};
}

/**
 * The same schema with every top-level field optional and without defaults: what PATCH checks (Eve fills
 * defaults on insert only; a PATCH that does not name a field leaves it as stored).
 */
export function partialSchema(schema: ValidationSchema): ValidationSchema {
	const out: ValidationSchema = {};
	for (const [key, rule] of Object.entries(schema)) {
		if (key.startsWith("$$")) {
			out[key] = rule;
			continue;
		}
		const obj: ValidationRuleObject | null =
			typeof rule === "string" ? null : Array.isArray(rule) ? { type: "multi", rules: rule } : { ...(rule as ValidationRuleObject) };
		if (obj) delete obj.default;
		out[key] = obj ? { ...obj, optional: true } : `${rule}|optional`;
	}
	return out;
}
