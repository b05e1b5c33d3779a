/**
 * The manifests: each overlay rendered by `kubectl kustomize` (as CI and an operator run it), every
 * object validated against the Kubernetes API schemas (kubernetes-models, offline), then what a cluster
 * admin checks before accepting them: resources, probes on the health port, shutdown timing, security
 * contexts, budgets, autoscalers, network policies, every service deployed exactly once.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import { ALL_SERVICES, ROOT } from "./support/harness";

type Obj = Record<string, any>;

// KUBECTL: another kubectl than the one on PATH; k8s/ must render with kubectl 1.20 (Debian's
// kubernetes-client, kustomize 2.0.3, what CI installs) as with a current one (docs/operations.md).
const KUBECTL = process.env.KUBECTL || "kubectl";

function kubectlKustomize(dir: string): Obj[] {
	const run = spawnSync(KUBECTL, ["kustomize", dir], { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 });
	if (run.error)
		throw new Error(
			`${KUBECTL} is needed to render k8s/ (apt-get install kubernetes-client, or set KUBECTL): ${run.error.message}`,
		);
	if (run.status !== 0) throw new Error(`${KUBECTL} kustomize ${dir} failed:\n${run.stderr}`);
	return parseYaml(run.stdout);
}

function parseYaml(text: string): Obj[] {
	return parseAllDocuments(text)
		.map(d => {
			if (d.errors.length) throw new Error(d.errors.map(e => e.message).join("\n"));
			return d.toJSON();
		})
		.filter(Boolean);
}

/**
 * Fields the Kubernetes API types do not have, and values of the wrong type: kubernetes-models' validators
 * do not refuse unknown fields (a misspelt `readinessProbe` would pass), so each object is also given to
 * TypeScript as a literal of its kind's interface (kubernetes-models' typings, generated from the same API
 * schema), whose excess-property check names every unknown field. One string per problem.
 */
function typeProblems(objects: Obj[], name: string): string[] {
	const dir = path.join(ROOT, "test-artifacts", "k8s-types");
	fs.mkdirSync(dir, { recursive: true });
	const lines = objects.flatMap((o, i) => {
		const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : [null, o.apiVersion];
		return [
			`import type { I${o.kind} as T${i} } from "kubernetes-models/${group ? `${group}/` : ""}${version}/${o.kind}";`,
			`export const o${i}: T${i} = ${JSON.stringify(o)};`,
		];
	});
	fs.writeFileSync(
		path.join(dir, `${name}.ts`),
		[...lines.filter(l => l.startsWith("import")), ...lines.filter(l => !l.startsWith("import"))].join("\n") + "\n",
	);
	const tsconfig = path.join(dir, `tsconfig.${name}.json`);
	fs.writeFileSync(
		tsconfig,
		JSON.stringify({
			compilerOptions: {
				strict: true,
				noEmit: true,
				module: "ES2022",
				moduleResolution: "bundler",
				target: "ES2022",
				skipLibCheck: true,
				types: [],
			},
			files: [`${name}.ts`],
		}),
	);
	const run = spawnSync(process.execPath, [path.join(ROOT, "node_modules/typescript/bin/tsc"), "-p", tsconfig], {
		cwd: ROOT,
		encoding: "utf8",
	});
	const problems = run.stdout.split("\n").filter(l => /error TS/.test(l));
	if (run.status !== 0 && !problems.length) throw new Error(`tsc failed: ${run.stdout}${run.stderr}`);
	// "<file>(line,col): error TSxxxx: message" -> the object (one per line) and the message
	return problems.map(l => {
		const [, line, message] = /\((\d+),\d+\): error TS\d+: (.*)$/.exec(l) ?? [undefined, "0", l];
		const o = objects[Number(line) - 1 - objects.length];
		return `${o ? `${o.kind}/${o.metadata?.name}` : "?"}: ${message}`;
	});
}

/** Problems kubernetes-models finds, one string each. */
function schemaProblems(objects: Obj[]): string[] {
	const run = spawnSync(process.execPath, [path.join(ROOT, "test/support/k8s-validate.mjs")], {
		cwd: ROOT,
		input: JSON.stringify(objects),
		encoding: "utf8",
	});
	if (run.status !== 0) throw new Error(run.stderr);
	return JSON.parse(run.stdout);
}

const workloads = (objs: Obj[]) => objs.filter(o => o.kind === "Deployment" || o.kind === "StatefulSet");
const fleetDeployments = (objs: Obj[]) =>
	objs.filter(o => o.kind === "Deployment" && o.metadata.labels?.["app.kubernetes.io/name"] === "fleet-ctl");
const envOf = (container: Obj, name: string) => container.env?.find((e: Obj) => e.name === name);
const matches = (selector: Record<string, string>, labels: Record<string, string> = {}) =>
	Object.entries(selector).every(([k, v]) => labels[k] === v);
const selects = (sel: Obj, labels: Record<string, string>) =>
	matches(sel.matchLabels ?? {}, labels) &&
	(sel.matchExpressions ?? []).every((e: Obj) => (e.operator === "In" ? e.values.includes(labels[e.key]) : true));

const EXTERNAL_SECRETS = parseYaml(fs.readFileSync(path.join(ROOT, "k8s/secrets.example.yaml"), "utf8"));

describe("k8s/", () => {
	it("finds unknown fields and wrong types, unknown fields being what the schema validators let through", () => {
		const deployment = kubectlKustomize(path.join(ROOT, "k8s/overlays/prod")).find(o => o.kind === "Deployment")!;
		const misspelt = structuredClone(deployment);
		misspelt.spec.template.spec.containers[0].readinesProbe = misspelt.spec.template.spec.containers[0].readinessProbe;
		expect(schemaProblems([misspelt])).toEqual([]);
		const mistyped = structuredClone(misspelt);
		mistyped.spec.replicas = "two";
		const found = typeProblems([mistyped], "broken");
		expect(found).toHaveLength(2);
		expect(found).toEqual(
			expect.arrayContaining([
				expect.stringMatching(/^Deployment\/api: .*'"?readinesProbe"?' does not exist in type 'IContainer'/),
				expect.stringMatching(/^Deployment\/api: Type 'string' is not assignable to type 'number'/),
			]),
		);
	});

	it("the Secret template is valid and names the secrets the manifests read", () => {
		expect(schemaProblems(EXTERNAL_SECRETS)).toEqual([]);
		expect(typeProblems(EXTERNAL_SECRETS, "secrets")).toEqual([]);
		expect(EXTERNAL_SECRETS.map(s => s.metadata.name).sort()).toEqual([
			"cm-gateway-secrets",
			"fleet-ctl-secrets",
			"nats-auth",
		]);
	});

	describe.each(["dev", "prod"])("overlay %s", overlay => {
		const objects = kubectlKustomize(path.join(ROOT, "k8s/overlays", overlay));
		const config = objects.find(o => o.kind === "ConfigMap" && o.metadata.name.startsWith("fleet-ctl-config"))!;

		it("renders objects that are valid against the Kubernetes schemas, all in one namespace", () => {
			expect(objects.length).toBeGreaterThan(20);
			expect(schemaProblems(objects)).toEqual([]);
			expect(typeProblems(objects, overlay)).toEqual([]);
			const ns = objects.find(o => o.kind === "Namespace")!.metadata.name;
			for (const o of objects.filter(o => o.kind !== "Namespace"))
				expect(`${o.kind}/${o.metadata.name} in ${o.metadata.namespace}`).toBe(`${o.kind}/${o.metadata.name} in ${ns}`);
		});

		it("deploys every service exactly once, from one image, with SERVICES choosing", () => {
			const deployed = fleetDeployments(objects).flatMap(d =>
				envOf(d.spec.template.spec.containers[0], "SERVICES").value.split(","),
			);
			expect(new Set(deployed).size).toBe(deployed.length);
			// vpn: services/vpn/vpn.service.ts (the Pritunl service) has its own Deployment
			expect(deployed.sort()).toEqual([...new Set([...ALL_SERVICES(), "vpn"])].sort());
			const images = new Set(fleetDeployments(objects).map(d => d.spec.template.spec.containers[0].image));
			expect(images.size).toBe(1);
			if (overlay === "prod") expect([...images][0]).toMatch(/:\d+\.\d+\.\d+$/);
		});

		it("gives every container resources, probes and a locked-down security context", () => {
			for (const w of workloads(objects)) {
				const pod = w.spec.template.spec;
				const where = `${w.kind}/${w.metadata.name}`;
				expect({
					where,
					nonRoot: pod.securityContext?.runAsNonRoot,
					seccomp: pod.securityContext?.seccompProfile?.type,
					token: pod.automountServiceAccountToken,
				}).toEqual({ where, nonRoot: true, seccomp: "RuntimeDefault", token: false });
				for (const c of pod.containers) {
					expect({
						where,
						requests: Object.keys(c.resources?.requests ?? {}).sort(),
						memoryLimit: !!c.resources?.limits?.memory,
					}).toEqual({ where, requests: ["cpu", "memory"], memoryLimit: true });
					expect({ where, liveness: !!c.livenessProbe, readiness: !!c.readinessProbe }).toEqual({
						where,
						liveness: true,
						readiness: true,
					});
					expect({ where, sc: c.securityContext }).toEqual({
						where,
						sc: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
					});
				}
			}
		});

		it("probes fleet-ctl on its health port, never under /api, with a grace period that covers the shutdown", () => {
			const shutdownS = Number(config.data.SHUTDOWN_TIMEOUT_MS) / 1000;
			for (const d of fleetDeployments(objects)) {
				const pod = d.spec.template.spec;
				const c = pod.containers[0];
				const healthPort = c.ports.find((p: Obj) => p.name === "health").containerPort;
				expect(String(healthPort)).toBe(config.data.HEALTH_PORT);
				expect([c.startupProbe.httpGet.path, c.livenessProbe.httpGet.path, c.readinessProbe.httpGet.path]).toEqual([
					"/live",
					"/live",
					"/ready",
				]);
				for (const probe of [c.startupProbe, c.livenessProbe, c.readinessProbe])
					expect(probe.httpGet.port).toBe("health");
				const preStop = c.lifecycle?.preStop?.exec?.command;
				const sleepS = preStop ? Number(preStop[1]) : 0;
				// preStop, then the in-flight requests, then a few seconds to stop services and leave NATS
				expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(sleepS + shutdownS + 5);
				expect(envOf(c, "NODEID").valueFrom.fieldRef.fieldPath).toBe("metadata.name");
			}
			// the gateway waits for endpoints and the ingress to drop it before it stops listening
			const api = fleetDeployments(objects).find(d => d.metadata.name === "api")!;
			expect(api.spec.template.spec.containers[0].lifecycle.preStop.exec.command[0]).toBe("sleep");
			expect(api.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
		});

		it("runs exactly one cm-gateway, never two at once, and autoscales only the stateless parts", () => {
			const cm = fleetDeployments(objects).find(d => d.metadata.name === "cm-gateway")!;
			expect(cm.spec.replicas).toBe(1);
			expect(cm.spec.strategy.type).toBe("Recreate");
			const hpas = objects
				.filter(o => o.kind === "HorizontalPodAutoscaler")
				.map(h => h.spec.scaleTargetRef.name)
				.sort();
			expect(hpas).toEqual(["api", "data"]);
		});

		it("has a disruption budget for every workload", () => {
			const pdbs = objects.filter(o => o.kind === "PodDisruptionBudget");
			for (const w of workloads(objects)) {
				const labels = w.spec.template.metadata.labels;
				const covering = pdbs.filter(p => selects(p.spec.selector, labels));
				if (w.metadata.name === "mongo") continue; // dev only, one pod
				expect({ w: w.metadata.name, pdbs: covering.length }).toEqual({ w: w.metadata.name, pdbs: 1 });
			}
		});

		it("exposes only the gateway: one Ingress to the api Service, no other way in", () => {
			const ingresses = objects.filter(o => o.kind === "Ingress");
			expect(
				ingresses.flatMap(i =>
					i.spec.rules.flatMap((r: Obj) => r.http.paths.map((p: Obj) => `${p.path} -> ${p.backend.service.name}`)),
				),
			).toEqual(["/ -> api"]);
			for (const s of objects.filter(o => o.kind === "Service")) expect(s.spec.type ?? "ClusterIP").toBe("ClusterIP");
			const policies = objects.filter(o => o.kind === "NetworkPolicy");
			const deny = policies.find(p => Object.keys(p.spec.podSelector).length === 0 && !p.spec.ingress);
			expect(deny?.spec.policyTypes).toEqual(["Ingress"]);
			// what may come from outside the namespace: the api's HTTP port from the ingress controller and, from monitoring, the health port
			const source = (r: Obj) =>
				r.from
					? r.from
							.map(
								(f: Obj) =>
									f.ipBlock?.cidr ?? Object.values(f.namespaceSelector?.matchLabels ?? { any: "any namespace" }).join(),
							)
							.join()
					: "anywhere";
			const open = policies.flatMap(p =>
				(p.spec.ingress ?? [])
					.filter((r: Obj) => !r.from || r.from.some((f: Obj) => f.namespaceSelector || f.ipBlock))
					.map((r: Obj) => ({
						pods: p.spec.podSelector.matchLabels,
						ports: r.ports.map((x: Obj) => x.port),
						from: source(r),
					})),
			);
			expect(open).toEqual(
				expect.arrayContaining([
					{
						pods: { "app.kubernetes.io/name": "fleet-ctl", "app.kubernetes.io/component": "api" },
						ports: ["http"],
						from: "ingress-nginx",
					},
					{ pods: { "app.kubernetes.io/name": "fleet-ctl" }, ports: ["health"], from: "monitoring" },
				]),
			);
			expect(open).toHaveLength(2);
		});

		it("runs NATS as a three-server JetStream cluster with authentication", () => {
			const nats = objects.find(o => o.kind === "StatefulSet" && o.metadata.name === "nats")!;
			expect(nats.spec.replicas).toBe(3);
			const conf: string = objects.find(o => o.kind === "ConfigMap" && o.metadata.name.startsWith("nats-config"))!.data[
				"nats.conf"
			];
			expect(conf).toMatch(/jetstream\s*\{/);
			expect(conf).toMatch(/authorization\s*\{[^}]*password: \$NATS_PASSWORD/);
			expect((conf.match(/nats-route:\/\//g) ?? []).length).toBe(3);
			for (const d of fleetDeployments(objects)) {
				const transporter = envOf(d.spec.template.spec.containers[0], "TRANSPORTER").value as string;
				expect(transporter.split(",")).toHaveLength(3);
				expect(transporter).toContain("$(NATS_PASSWORD)@");
			}
		});

		it("reads only Secrets and ConfigMaps that the overlay makes or the Secret template names", () => {
			const made = new Set(
				objects.filter(o => o.kind === "Secret" || o.kind === "ConfigMap").map(o => o.metadata.name),
			);
			const external = new Set(EXTERNAL_SECRETS.map(s => s.metadata.name));
			const refs = new Set<string>();
			for (const w of workloads(objects)) {
				for (const c of w.spec.template.spec.containers) {
					for (const e of c.envFrom ?? []) refs.add((e.secretRef ?? e.configMapRef).name);
					for (const e of c.env ?? []) if (e.valueFrom?.secretKeyRef) refs.add(e.valueFrom.secretKeyRef.name);
				}
				for (const v of w.spec.template.spec.volumes ?? []) if (v.configMap) refs.add(v.configMap.name);
			}
			for (const name of refs)
				expect({ name, known: made.has(name) || (overlay === "prod" && external.has(name)) }).toEqual({
					name,
					known: true,
				});
			if (overlay === "prod") expect(objects.filter(o => o.kind === "Secret")).toEqual([]);
		});

		it(overlay === "dev" ? "runs a single-node MongoDB" : "keeps MongoDB outside the cluster", () => {
			const mongo = objects.filter(o => o.kind === "StatefulSet" && o.metadata.name === "mongo");
			expect(mongo.map(m => m.spec.replicas)).toEqual(overlay === "dev" ? [1] : []);
		});
	});
});
