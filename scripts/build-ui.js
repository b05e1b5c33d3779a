#!/usr/bin/env node
/*
 * After the dashboard's Vite build (ui/vite.config.mts → dist/ui): ECharts from the npm package into dist/ui/vendor —
 * served by the gateway, never a CDN; the pages load it as a plain script.
 */

const fs = require("node:fs");
const path = require("node:path");

const root = path.resolve(__dirname, "..");
const out = path.join(root, "dist", "ui");
if (!fs.existsSync(path.join(out, "index.html")))
	throw new Error("dist/ui/index.html is missing: run the Vite build first (npm run build)");
fs.mkdirSync(path.join(out, "vendor"), { recursive: true });
fs.copyFileSync(require.resolve("echarts/dist/echarts.min.js"), path.join(out, "vendor", "echarts.min.js"));
