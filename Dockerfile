# One image for every process of the fleet (api, worker, reconciler); the command picks one:
#   api         node dist/src/server/api.js      (default)
#   worker      node dist/src/server/worker.js
#   reconciler  node dist/src/server/reconciler.js
# Build: docker build -t durable-agent-fleet .
# The sandbox (a test double of the vendors) is not in it: `docker build --target sandbox -t
# durable-agent-fleet-sandbox .` builds the development-only image that adds it (compose profile dev).
# For reproducible builds pin the base image by digest (node:24-bookworm-slim@sha256:...).
ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: all dependencies, compile TypeScript, copy the Lua scripts next to the JS -------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY sandbox ./sandbox
COPY migrations ./migrations
RUN npm run build

# --- deps: production dependencies only, from the same lockfile ------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# --- sandbox (development only: docker build --target sandbox) ------------------------------------
FROM ${NODE_IMAGE} AS sandbox
ENV NODE_ENV=production \
    NODE_OPTIONS=--enable-source-maps \
    SANDBOX_HOST=0.0.0.0
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/sandbox ./dist/sandbox
COPY --from=build /app/dist/migrations ./dist/migrations
COPY package.json ./
USER node
EXPOSE 4010
STOPSIGNAL SIGTERM
CMD ["node", "dist/sandbox/main.js"]

# --- runtime ------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    NODE_OPTIONS=--enable-source-maps \
    APP_MODE=production \
    MODEL_PROVIDER=openai \
    HOST=0.0.0.0
WORKDIR /app
# Owned by root and read-only for the app user: the container runs with a read-only root fs.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
# The archive's schema (ARCHIVE_URL): every process applies the migrations it finds missing at boot.
COPY --from=build /app/dist/migrations ./dist/migrations
COPY package.json ./
USER node
# api, worker metrics, reconciler metrics
EXPOSE 3000 9464 9465
# Exec form: node is PID 1 and receives SIGTERM itself (the worker's handoff depends on it).
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/server/api.js"]
