#!/usr/bin/env node
/*
 * The dashboard's static files next to its compiled modules in dist/ui (tsc -p ui/tsconfig.json makes the
 * .js): the HTML, the stylesheet, and ECharts from the npm package — served by the gateway, never a CDN.
 */
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const root = path.resolve(__dirname, "..");
const out = path.join(root, "dist", "ui");
fs.mkdirSync(path.join(out, "vendor"), { recursive: true });
for (const f of fs.readdirSync(path.join(root, "ui"))) {
	if (/\.(html|css|svg|ico)$/.test(f)) fs.copyFileSync(path.join(root, "ui", f), path.join(out, f));
}
fs.copyFileSync(require.resolve("echarts/dist/echarts.min.js"), path.join(out, "vendor", "echarts.min.js"));
