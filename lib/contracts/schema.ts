/**
 * The TypeScript type a fastest-validator schema admits, derived from the schema literal itself (declared
 * `as const`), so an action's `params` and the type its callers and handler see are one declaration.
 * `Input<S>` is what a caller may send (a field with a default may be left out); `Output<S>` is what the
 * handler receives after validation (defaults filled in).
 */

type Shorthand<T extends string> = T extends `${infer Base}|${string}` ? Base : T;

/** The value type of one fastest-validator type name (a caller may send any object where the handler reads a record). */
type Named<T, Mode> = T extends "string" | "email" | "url" | "uuid" | "objectID" | "mac" | "luhn"
	? string
	: T extends "number"
		? number
		: T extends "boolean"
			? boolean
			: T extends "date"
				? Date
				: T extends "array"
					? unknown[]
					: T extends "object"
						? Mode extends "in"
							? object
							: Record<string, unknown>
						: unknown;

type Defaulted<R> = R extends { default: unknown } ? true : false;
type Optional<R> = R extends string
	? R extends `${string}|optional${string}`
		? true
		: false
	: R extends { optional: true }
		? true
		: false;

/** The type of one rule: a shorthand string, a rule object, or a list of alternatives. */
export type RuleType<R, Mode extends "in" | "out"> = R extends readonly (infer A)[]
	? RuleType<A, Mode>
	: R extends string
		? Named<Shorthand<R>, Mode>
		: R extends { type: "array"; items: infer I }
			? RuleType<I, Mode>[]
			: R extends { type: "record"; value: infer V }
				? Record<string, RuleType<V, Mode>>
				: R extends { type: "object"; props: infer P }
					? Props<P, Mode>
					: R extends { type: "enum"; values: readonly (infer V)[] }
						? V
						: R extends { type: "equal"; value: infer V }
							? V
							: R extends { type: "multi"; rules: readonly (infer A)[] }
								? RuleType<A, Mode>
								: R extends { type: infer T }
									? Named<T, Mode>
									: unknown;

/** Whether the field may be absent: optional for both sides, defaulted only for callers. */
type Absent<R, Mode> = Mode extends "in"
	? Optional<R> extends true
		? true
		: Defaulted<R>
	: Optional<R> extends true
		? Defaulted<R> extends true
			? false
			: true
		: false;
type Nullable<R> = R extends { nullable: true } ? null : never;

type Flat<T> = { [K in keyof T]: T[K] } & {};
type Props<P, Mode extends "in" | "out"> = Flat<
	{
		-readonly [K in keyof P as K extends `$$${string}` ? never : Absent<P[K], Mode> extends true ? never : K]:
			| RuleType<P[K], Mode>
			| Nullable<P[K]>;
	} & {
		-readonly [K in keyof P as K extends `$$${string}` ? never : Absent<P[K], Mode> extends true ? K : never]?:
			| RuleType<P[K], Mode>
			| Nullable<P[K]>;
	}
>;

/** What a caller sends for the params schema `S`. */
export type Input<S> = Props<S, "in">;
/** What the handler receives for the params schema `S`. */
export type Output<S> = Props<S, "out">;
