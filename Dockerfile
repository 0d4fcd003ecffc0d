# One image for every role (all-in-one, host only, runner only: STEERBOT_HOST /
# STEERBOT_RUNNER pick). Two stages: TypeScript is compiled with the dev
# dependencies, and the image keeps only production dependencies and dist/
# (no sources, tests, benchmarks or tsx). Node 24: its AsyncLocalStorage needs no
# promise hooks, so tracing costs less than on Node 22 (docs/benchmarks.md#tracing).

FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY host ./host
COPY runner ./runner
COPY plugins ./plugins
COPY app ./app
COPY testing ./testing
# The test kit (steerbot/testing) is for plugin authors' tests, not for the running bot.
RUN npm run build && rm -rf dist/testing

FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080
# Node's own fetch (the slim image has no curl or wget), on PORT (default 8080). Every
# role serves /healthz there: a runner-only process has a small server for its probes.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node directly, not npm: SIGTERM reaches steerbot, which shuts down cleanly.
CMD ["node", "dist/app/cli.js", "start"]
