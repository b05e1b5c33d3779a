/// <reference lib="es2024.string" />
/**
 * fastest-validator schemas checked with Eve's (Cerberus') vocabulary: failures become `_issues`
 * such as {"name": "required field", "bogus": "unknown field", "info": {"regex": "must be of string type"}}.
 * Type names are Eve's: an integer field that gets a string is "must be of integer type", an ObjectId
 * field (a string rule with the 24-hex pattern) that gets anything else is "must be of objectid type".
 * Schemas of client documents also refuse strings that are not well-formed Unicode (see malformedStrings).
 */
import Validator, {
	type ValidationError,
	type ValidationSchema,
	type ValidationRuleObject,
	type ValidationRule,
} from "fastest-validator";
import type { Issues } from "./errors";
import { OBJECT_ID } from "./ids";

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

/**
 * The Eve type of a rule whose fastest-validator type is wider (integer: a number rule; objectid: a
 * patterned string rule) rides in the rule's own messages, marked so describe() knows it from any text.
 */
const TYPE_MARK = "\u0000eve-type:";

function describe(err: ValidationError, doc: unknown, path: string[]): string {
	if (err.type === "required") return valueAt(doc, path) === null ? "null value not allowed" : "required field";
	if (typeof err.message === "string" && err.message.startsWith(TYPE_MARK))
		return `must be of ${err.message.slice(TYPE_MARK.length)} type`;
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

/** Sets an own property, whatever the key (`__proto__` included: never the prototype). */
function setOwn(node: Record<string, unknown>, key: string, value: unknown): void {
	Object.defineProperty(node, key, { value, writable: true, enumerable: true, configurable: true });
}

/** The own property `key` of `node`, never one inherited (a client's `__proto__` must not reach Object.prototype). */
function own(node: Record<string, unknown>, key: string): unknown {
	return Object.hasOwn(node, key) ? node[key] : undefined;
}

function addIssue(issues: Issues, path: string[], message: string): void {
	if (path.length === 0) path = ["_root"];
	let node = issues as Record<string, unknown>;
	for (const p of path.slice(0, -1)) {
		const existing = own(node, p);
		if (existing == null || typeof existing !== "object" || Array.isArray(existing)) setOwn(node, p, {});
		node = own(node, p) as Record<string, unknown>;
	}
	const leaf = path[path.length - 1];
	const prev = own(node, leaf);
	if (prev == null) setOwn(node, leaf, message);
	else if (Array.isArray(prev)) prev.push(message);
	else if (typeof prev === "string") setOwn(node, leaf, [prev, message]);
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

export const NOT_WELL_FORMED = "must be well-formed Unicode (a lone UTF-16 surrogate is not)";
export const KEY_NOT_WELL_FORMED = "keys must be well-formed Unicode (a lone UTF-16 surrogate is not)";
/** Issues name a field at most this deep (deeper strings are reported at the field this deep that holds them). */
const MAX_ISSUE_DEPTH = 16;

/**
 * Every string in a document, at any depth, values and keys alike, that is not well-formed Unicode (a lone
 * UTF-16 surrogate, such as JSON "\ud800"): such a string cannot be stored or sent on as UTF-8 without
 * being changed (MongoDB, salt-api, webhooks), so it is refused naming the field. Walks with its own stack,
 * so no nesting can overflow it.
 */
export function malformedStrings(doc: unknown): Issues | null {
	const issues: Issues = {};
	const stack: Array<{ value: unknown; path: string[] }> = [{ value: doc, path: [] }];
	let found = false;
	while (stack.length) {
		const { value, path } = stack.pop() as { value: unknown; path: string[] };
		if (typeof value === "string") {
			if (!value.isWellFormed()) {
				addIssue(issues, path, NOT_WELL_FORMED);
				found = true;
			}
			continue;
		}
		if (value === null || typeof value !== "object" || value instanceof Date) continue;
		for (const [key, child] of Object.entries(value)) {
			if (!key.isWellFormed()) {
				addIssue(issues, path, KEY_NOT_WELL_FORMED);
				found = true;
				continue;
			}
			stack.push({ value: child, path: path.length < MAX_ISSUE_DEPTH ? [...path, key] : path });
		}
	}
	return found ? issues : null;
}

/** Adds every issue of `more` to `into` (a field named by both keeps both messages). */
function mergeIssues(into: Issues, more: Issues): void {
	const stack: Array<{ node: Issues; path: string[] }> = [{ node: more, path: [] }];
	while (stack.length) {
		const { node, path: at } = stack.pop() as { node: Issues; path: string[] };
		for (const [key, value] of Object.entries(node)) {
			if (value !== null && typeof value === "object" && !Array.isArray(value))
				stack.push({ node: value as Issues, path: [...at, key] });
			else for (const message of Array.isArray(value) ? value : [value]) addIssue(into, [...at, key], String(message));
		}
	}
}

export type Check = (doc: unknown) => Issues | null;

export interface CompileOptions {
	/** Refuse strings (values and keys) that are not well-formed Unicode: on for what clients write. */
	wellFormed?: boolean;
}

type RuleLike = ValidationRule | ValidationRule[];

function isRuleObject(rule: unknown): rule is ValidationRuleObject {
	return (
		rule !== null &&
		typeof rule === "object" &&
		!Array.isArray(rule) &&
		typeof (rule as { type?: unknown }).type === "string"
	);
}

/** Whether a rule is an ObjectId reference as the schemas write it: a string with the 24-hex pattern. */
function isObjectIdRule(rule: ValidationRuleObject): boolean {
	const pattern: unknown = rule.pattern;
	return rule.type === "string" && pattern instanceof RegExp && pattern.source === OBJECT_ID.source;
}

/**
 * A copy of a rule (and the rules inside it: props, items, record keys and values, multi) in which integer
 * and ObjectId rules carry their Eve type name in their messages. The schema given is left as it is.
 */
function withEveTypes(rule: RuleLike): RuleLike {
	if (Array.isArray(rule)) return rule.map(r => withEveTypes(r) as ValidationRule);
	if (!isRuleObject(rule)) return rule;
	const out: ValidationRuleObject = { ...rule };
	const messages: Record<string, string> = {};
	if (out.type === "number" && out.integer === true) messages.number = `${TYPE_MARK}integer`;
	if (isObjectIdRule(out)) {
		messages.string = `${TYPE_MARK}objectid`;
		messages.stringPattern = `${TYPE_MARK}objectid`;
	}
	if (Object.keys(messages).length)
		out.messages = { ...(out.messages as Record<string, string> | undefined), ...messages };
	for (const key of ["props", "properties"] as const) {
		const nested: unknown = out[key];
		if (nested && typeof nested === "object") out[key] = withEveTypesAll(nested as ValidationSchema);
	}
	for (const key of ["items", "key", "value"] as const) {
		const nested: unknown = out[key];
		if (nested !== undefined && typeof nested !== "string") out[key] = withEveTypes(nested as RuleLike);
	}
	if (out.type === "multi" && Array.isArray(out.rules)) out.rules = out.rules.map((r: RuleLike) => withEveTypes(r));
	return out;
}

function withEveTypesAll(schema: ValidationSchema): ValidationSchema {
	const out: ValidationSchema = {};
	for (const [key, rule] of Object.entries(schema))
		out[key] = key.startsWith("$$") ? rule : withEveTypes(rule as RuleLike);
	return out;
}

/** Whether a rule says its value may be null (`nullable`, `any`, or a `multi` with such a rule). */
function allowsNull(rule: unknown): boolean {
	if (typeof rule === "string") return rule.split("|").some(part => part === "nullable" || part === "any");
	if (Array.isArray(rule)) return rule.some(allowsNull);
	if (!isRuleObject(rule)) return true;
	if (rule.nullable === true || rule.type === "any") return true;
	return rule.type === "multi" && Array.isArray(rule.rules) && rule.rules.some(allowsNull);
}

function isOptional(rule: unknown): boolean {
	if (typeof rule === "string") return rule.split("|").includes("optional");
	return isRuleObject(rule) && rule.optional === true;
}

/**
 * fastest-validator's `optional` lets `null` through; Eve (Cerberus) does not: an optional field given `null`
 * is "null value not allowed" unless its rule says `nullable`. Walks the schema's props and the objects of
 * lists, where the document has them (what it does not have was checked by the validator).
 */
function nullIssues(schema: ValidationSchema, doc: unknown, path: string[], issues: Issues): void {
	if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return;
	for (const [key, rule] of Object.entries(schema)) {
		if (key.startsWith("$$") || !Object.hasOwn(doc, key)) continue;
		const value = (doc as Record<string, unknown>)[key];
		if (value === null) {
			if (isOptional(rule) && !allowsNull(rule)) addIssue(issues, [...path, key], "null value not allowed");
			continue;
		}
		if (!isRuleObject(rule)) continue;
		const props = (rule.props ?? rule.properties) as ValidationSchema | undefined;
		if (props && typeof props === "object") nullIssues(props, value, [...path, key], issues);
		const items = rule.items as unknown;
		if (Array.isArray(value) && isRuleObject(items)) {
			const inner = (items.props ?? items.properties) as ValidationSchema | undefined;
			if (inner && typeof inner === "object")
				value.forEach((element, i) => nullIssues(inner, element, [...path, key, String(i)], issues));
		}
	}
}

/** Compiles a record schema into a checker that returns Eve issues, or null when the document is valid. */
export function compileSchema(schema: ValidationSchema, options: CompileOptions = {}): Check {
	const check = validator.compile({ $$strict: true, ...withEveTypesAll(schema) }) as (
		v: unknown,
	) => true | ValidationError[];
	return doc => {
		if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return { _root: "must be of dict type" };
		const result = check(doc);
		const nulls: Issues = {};
		nullIssues(schema, doc, [], nulls);
		const found = [
			result === true ? null : toIssues(result, doc),
			Object.keys(nulls).length ? nulls : null,
			options.wellFormed ? malformedStrings(doc) : null,
		].filter((i): i is Issues => i !== null);
		if (!found.length) return null;
		for (const more of found.slice(1)) mergeIssues(found[0], more);
		return found[0];
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
			typeof rule === "string"
				? null
				: Array.isArray(rule)
					? { type: "multi", rules: rule }
					: { ...(rule as ValidationRuleObject) };
		if (obj) delete obj.default;
		out[key] = obj ? { ...obj, optional: true } : `${rule}|optional`;
	}
	return out;
}
