# syntax=docker/dockerfile:1
# One image for every fleet-ctl process: SERVICES picks what a container runs (k8s/, docs/operations.md).
# test/image.spec.ts runs this file's CMD on the build output, and checks what the runtime stage copies
# needs only production dependencies.

# ---------------------------------------------------------------- build: compile the TypeScript
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
# dist/test and dist/bench are the simulators and the benchmark: not part of the image
RUN npm run build && rm -rf dist/test dist/bench && npm prune --omit=dev --no-audit --no-fund

# ---------------------------------------------------------------- runtime: compiled JavaScript, production dependencies
FROM node:22-bookworm-slim
# tini as PID 1: forwards SIGTERM to node (which then drains, see docs/operations.md) and reaps zombies.
RUN apt-get update \
	&& apt-get install -y --no-install-recommends tini \
	&& rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
	PORT=3000 \
	HEALTH_PORT=3001 \
	DATA_DIR=/data \
	LOG_FORMAT=json
WORKDIR /app
# Owned by root and not writable by the process: the root file system can be mounted read-only. The only
# writable places are DATA_DIR (a volume; unused with MONGO_URI) and /tmp (an emptyDir in k8s/).
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
RUN mkdir -p /data && chown 1000:1000 /data
# the image's `node` user
USER 1000:1000
EXPOSE 3000 3001
ENTRYPOINT ["/usr/bin/tini", "--"]
# --no-warnings: Node's warnings go to the JSON log (lib/runtime/logging.ts), not to stderr as plain text.
CMD ["node", "--no-warnings", "node_modules/moleculer/bin/moleculer-runner.js", "--config", "dist/moleculer.config.js"]
