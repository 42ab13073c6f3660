# syntax=docker/dockerfile:1
# One image for agentplane's programs: the first argument picks the control-api, the runtime, the operator or the
# runtime's migrations (hack/entrypoint.sh). The build stage compiles the workspace packages with `tsc -b`; the final
# stage runs `node` on that JavaScript with production dependencies only: no TypeScript, no tsx, no npm, no
# compilers. It runs as uid 10001 with every file owned by root, so the process cannot rewrite its own code.
#
#   docker build -t ghcr.io/agentplane/agentplane:0.1.0 .
#   docker run --rm -p 8080:8080 ghcr.io/agentplane/agentplane:0.1.0 control-api

# Node 24 LTS, the version hack/node.sh gives CI and the tests.
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# ---- compile: every package's src/ to its dist/
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.base.json tsconfig.build.json ./
COPY lib/package.json lib/tsconfig.json ./lib/
COPY runtime/package.json runtime/tsconfig.json ./runtime/
COPY control-api/package.json control-api/tsconfig.json ./control-api/
COPY operator/package.json operator/tsconfig.json ./operator/
COPY all-in-one/package.json all-in-one/tsconfig.json ./all-in-one/
COPY client/package.json client/tsconfig.json ./client/
COPY console/package.json console/tsconfig.json ./console/
COPY test/package.json ./test/
# No install scripts: nothing here needs one, and none may fetch or phone home at build time.
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts --no-audit --no-fund
COPY lib/src ./lib/src
COPY runtime/src ./runtime/src
COPY control-api/src ./control-api/src
COPY operator/src ./operator/src
COPY all-in-one/src ./all-in-one/src
COPY client/src ./client/src
# The web console: static files the control-api serves at /console (docs/decisions/0083).
COPY console/index.html console/vite.config.ts ./console/
COPY console/src ./console/src
RUN npm run build \
 && npm run build:console \
 && mkdir /out \
 && for p in lib runtime control-api operator client console; do \
      mkdir -p /out/$p && cp -r $p/package.json $p/dist /out/$p/ && rm -f /out/$p/dist/.tsbuildinfo; \
    done

# ---- production dependencies
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY lib/package.json ./lib/
COPY runtime/package.json ./runtime/
COPY control-api/package.json ./control-api/
COPY operator/package.json ./operator/
COPY all-in-one/package.json ./all-in-one/
COPY client/package.json ./client/
COPY console/package.json ./console/
COPY test/package.json ./test/
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 # Workspace packages are links into /app; the final stage brings the compiled packages to where they point.
 && rm -f node_modules/@agentplane/all-in-one node_modules/@agentplane/test

# ---- jemalloc, which the entrypoint preloads (decision 0051): the library alone, at one path for every architecture
FROM ${NODE_IMAGE} AS jemalloc
RUN apt-get update \
 && apt-get install -y --no-install-recommends libjemalloc2 \
 && mkdir /out \
 && cp /usr/lib/*-linux-gnu/libjemalloc.so.2 /out/libjemalloc.so.2

# ---- the browser Pod's image (`docker build --target browser`; decision 0092): the same programs with Debian's
# chromium, running `entrypoint.sh browser` (Chromium behind Playwright's browser server and the egress guard). The
# operator runs it in each project namespace; the main image below carries no browser.
FROM ${NODE_IMAGE} AS browser
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium fonts-liberation ca-certificates \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc/* \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
           /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
 && groupadd --system --gid 10001 agentplane \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin agentplane
# Chromium writes its profile under HOME: /tmp, an emptyDir, since the root filesystem is read-only.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    HOME=/tmp \
    LOG_FORMAT=json
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /out/ ./
COPY package.json ./
COPY --chmod=0755 hack/entrypoint.sh ./hack/entrypoint.sh
USER 10001:10001
EXPOSE 8083
ENTRYPOINT ["/app/hack/entrypoint.sh"]
CMD ["browser"]

# ---- the image (the default target: the last stage)
FROM ${NODE_IMAGE}
# npm and corepack are build tools here: the running programs never use them.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
           /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
 && groupadd --system --gid 10001 agentplane \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin agentplane \
 && mkdir -p /var/lib/agentplane \
 && chown 10001:10001 /var/lib/agentplane
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    AGENTPLANE_DATA_DIR=/var/lib/agentplane \
    LOG_FORMAT=json
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /out/ ./
COPY package.json ./
COPY --from=jemalloc /out/libjemalloc.so.2 /usr/local/lib/libjemalloc.so.2
COPY --chmod=0755 hack/entrypoint.sh ./hack/entrypoint.sh
USER 10001:10001
# control-api, runtime (data plane), operator (health, readiness, metrics)
EXPOSE 8080 8081 8082
VOLUME ["/var/lib/agentplane"]
ENTRYPOINT ["/app/hack/entrypoint.sh"]
CMD ["control-api"]
