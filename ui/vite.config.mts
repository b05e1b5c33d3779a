/**
 * The dashboard's build (docs/dashboard.md): Vite bundles each page (index.html, docs.html) with its modules, the
 * shared `lib/repl/words.ts` and Preact into dist/ui, with content-hashed file names; the gateway serves them (no
 * CDN). Type-checking is tsc's (`tsc -p ui/tsconfig.json`, before this, in `npm run build`). ECharts stays a plain
 * script the pages load from vendor/ (scripts/build-ui.js copies it from the npm package).
 */
import { resolve } from "node:path";
import { defineConfig } from "vite";

export default defineConfig({
	root: import.meta.dirname,
	// Served at /, but relative paths keep the pages working behind a path prefix.
	base: "./",
	publicDir: false,
	logLevel: "warn",
	oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
	build: {
		outDir: resolve(import.meta.dirname, "../dist/ui"),
		emptyOutDir: true,
		// The gateway's Content-Security-Policy allows no inline script or style: nothing is inlined.
		assetsInlineLimit: 0,
		modulePreload: { polyfill: false },
		sourcemap: false,
		rollupOptions: {
			input: { index: resolve(import.meta.dirname, "index.html"), docs: resolve(import.meta.dirname, "docs.html") },
		},
	},
});
