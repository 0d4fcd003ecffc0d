# One image for both roles; docker-compose.yml picks the role with
# STEERBOT_HOST / STEERBOT_RUNNER.
FROM node:22-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
USER node
EXPOSE 8080
# `npm start` without npm in between, so SIGTERM reaches steerbot directly and it shuts down cleanly.
CMD ["node", "--import", "tsx", "src/cli.ts"]
