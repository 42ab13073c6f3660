# syntax=docker/dockerfile:1
# One image for agentplane's programs: the first argument picks the control-api, the runtime, the operator or the
# runtime's migrations (hack/entrypoint.sh). TypeScript runs through tsx, a runtime dependency, so there is no
# compile stage. The final stage has production dependencies only, no npm and no compilers, and runs as uid 10001
# with every file owned by root, so the process cannot rewrite its own code.
#
#   docker build -t ghcr.io/agentplane/agentplane:0.1.0 .
#   docker run --rm -p 8080:8080 ghcr.io/agentplane/agentplane:0.1.0 control-api

ARG NODE_IMAGE=node:20-bookworm-slim

# ---- production dependencies
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts: nothing here needs one (esbuild, under tsx, finds its platform binary package without its
# postinstall), and none may fetch or phone home at build time.
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# ---- the image
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
COPY package.json package-lock.json tsconfig.json ./
COPY lib ./lib
COPY runtime ./runtime
COPY control-api ./control-api
COPY operator ./operator
COPY --chmod=0755 hack/entrypoint.sh ./hack/entrypoint.sh
USER 10001:10001
# control-api, runtime (data plane), operator (health, readiness, metrics)
EXPOSE 8080 8081 8082
VOLUME ["/var/lib/agentplane"]
ENTRYPOINT ["/app/hack/entrypoint.sh"]
CMD ["control-api"]
