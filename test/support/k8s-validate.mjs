// Validates Kubernetes objects (a JSON array on stdin) against the API's schemas with kubernetes-models
// (ESM only, hence a process of its own); prints a JSON array of problems, empty when all are valid.
const input = JSON.parse(
	await new Promise(resolve => {
		let text = "";
		process.stdin.on("data", d => (text += d));
		process.stdin.on("end", () => resolve(text));
	}),
);
const problems = [];
for (const obj of input) {
	const where = `${obj.kind}/${obj.metadata?.name}`;
	const [group, version] = obj.apiVersion.includes("/") ? obj.apiVersion.split("/") : [null, obj.apiVersion];
	let Model;
	try {
		Model = (await import(`kubernetes-models/${group ? `${group}/` : ""}${version}`))[obj.kind];
	} catch (err) {
		problems.push(`${where}: unknown apiVersion ${obj.apiVersion} (${err.message})`);
		continue;
	}
	if (!Model) {
		problems.push(`${where}: ${obj.apiVersion} has no kind ${obj.kind}`);
		continue;
	}
	try {
		new Model(obj).validate();
	} catch (err) {
		problems.push(`${where}: ${err.message}`);
	}
}
process.stdout.write(JSON.stringify(problems));
