/**
 * Node's on-disk compile cache (node:module enableCompileCache, Node >= 22.1) for the code loaded after the
 * broker's configuration: the services and their libraries are compiled once and their V8 code cache reused by
 * the next start. Imported first by moleculer.config.ts. The cache lives in the system's temporary directory
 * (an emptyDir at /tmp in k8s/); where it cannot be written Node carries on without it, and
 * NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
import { enableCompileCache } from "node:module";

enableCompileCache?.();
