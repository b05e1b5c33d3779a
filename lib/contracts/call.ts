/**
 * The typed door to internal actions: `call(ctx, "hosts.resolveTarget", {...})` checks the params and types the
 * result from lib/contracts/actions.ts; `action("hosts.resolveTarget", {...})` declares the action with the
 * contract's schema and a handler typed by it. Moleculer's own `ctx.call` takes any string and any params.
 */
import type { ActionSchema, CallingOptions, Context } from "moleculer";
import { PARAMS, type Results } from "./actions";
import type { Input, Output } from "./schema";

export type ActionName = keyof typeof PARAMS & keyof Results;
/** What a caller sends to the action `N`. */
export type ParamsOf<N extends ActionName> = Input<(typeof PARAMS)[N]>;
/** What the action `N`'s handler receives, validated. */
export type HandlerParams<N extends ActionName> = Output<(typeof PARAMS)[N]>;
/** What the action `N` answers. */
export type ResultOf<N extends ActionName> = Results[N];

/** Anything that calls actions: a Context, a ServiceBroker. */
interface Calls {
	call(name: string, params?: unknown, opts?: CallingOptions): Promise<unknown>;
}

/** Calls the contracted action `name`. */
// biome-ignore lint/complexity/noBannedTypes: `{} extends P` asks whether P has no required field, which is the point
export function call<N extends ActionName>(
	by: Calls,
	name: N,
	...rest: {} extends ParamsOf<N>
		? [params?: ParamsOf<N>, opts?: CallingOptions]
		: [params: ParamsOf<N>, opts?: CallingOptions]
): Promise<ResultOf<N>> {
	return by.call(name, ...rest) as Promise<ResultOf<N>>;
}

/** An action's declaration without its params (they come from the contract) and with a typed handler. */
type Declared<N extends ActionName, This> = Omit<ActionSchema, "params" | "handler"> & {
	handler(this: This, ctx: Context<HandlerParams<N>, any>): Promise<ResultOf<N>> | ResultOf<N>;
};

/** Declares the contracted action `name` (the part after the service's name) with the contract's params schema. */
export function action<N extends ActionName, This = any>(name: N, def: Declared<N, This>): ActionSchema {
	return { ...def, params: PARAMS[name] as unknown as ActionSchema["params"] } as ActionSchema;
}
