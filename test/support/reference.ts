/**
 * Where the read-only shared tree's reference material is (the real Salt 3006 captures): SHARED_DIR (what
 * .ci/run exports), the directory next to the checkout, or /work/shared. undefined when none has it.
 */
import fs from "node:fs";
import path from "node:path";

export function referenceDir(name: string): string | undefined {
	return [process.env.SHARED_DIR, path.resolve(__dirname, "../../../shared"), "/work/shared"]
		.filter((d): d is string => !!d)
		.map(d => path.join(d, "reference", name))
		.find(p => fs.existsSync(p));
}
