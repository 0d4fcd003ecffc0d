import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const source = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/** Test files that start processes (tsx or dist), kill them, restart servers, pack the package or drive a browser. */
const E2E = [
  'test/chaos/**/*.test.ts',
  'test/cluster/**/*.test.ts',
  'test/sentinel/**/*.test.ts',
  'test/package/**/*.test.ts',
  'test/web/**/*.test.ts',
  'test/runner/e2e-recorded-answer.test.ts',
  'test/runner/e2e-recovery.test.ts',
  'test/runner/recovery-lease.test.ts',
  'test/schedules/fire-kill.test.ts',
  'test/tools/durable.test.ts',
  'test/channels/upload-kill.test.ts',
  'test/tools/ask-user-web.test.ts',
  'test/agent/subagents-crash.test.ts',
  'test/http-agent/python-agent.test.ts',
  'test/channels/slack-start.test.ts',
  'test/channels/whatsapp-start.test.ts',
  'test/channels/matrix-start.test.ts',
  'test/channels/teams-start.test.ts',
  'test/host/prefix-isolation.test.ts',
  'test/host/redis-outage.test.ts',
  'test/events/api-e2e.test.ts',
  'test/people/cli-pair.test.ts',
  'test/export/cli-export.test.ts',
  'test/telemetry/readiness.test.ts',
  'test/security/send-api.test.ts',
  'test/security/scope-model.test.ts',
  'test/security/web-conversation-id.test.ts',
  'test/cli.test.ts',
  'test/lazy-plugins.test.ts',
  'test/secrets-e2e.test.ts',
  'test/declared-secrets.test.ts',
  'test/upgrade/mixed-release.test.ts',
];

export default defineConfig({
  // The package's own entry points, for examples/ (written as a user writes them): the sources, no build needed.
  resolve: {
    alias: [
      { find: /^steerbot$/, replacement: source('./app/index.ts') },
      { find: /^steerbot\/runner$/, replacement: source('./runner/index.ts') },
      { find: /^steerbot\/channel$/, replacement: source('./src/channel.ts') },
      { find: /^steerbot\/plugin$/, replacement: source('./src/plugin/kit.ts') },
      { find: /^steerbot\/testing$/, replacement: source('./testing/index.ts') },
    ],
  },
  test: {
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    reporters: ['default', './test/summary-reporter.ts'],
    // Two lanes: `unit` runs in-process (the inner loop, `npm run test:unit`); `e2e` starts processes,
    // kills them, restarts Redis, packs the package or drives a browser. `npm test` runs both, unit first.
    // Most test time is spent waiting (on Redis, fake servers, expiries), not computing, so both lanes run more
    // files at once than there are cores; vitest's default (cores - 1) would run them one at a time on 2 cores.
    projects: [
      {
        extends: true,
        // Without isolation a worker loads the sources once for all its files rather than once per file (half
        // the lane's time); the files keep no state between them but what they clean up (Redis prefixes, servers).
        test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: E2E, isolate: false, maxWorkers: 6 },
      },
      // Fewer at once: these spawn processes (tsx), which compete for the cores.
      { extends: true, test: { name: 'e2e', include: E2E, maxWorkers: 3, sequence: { groupOrder: 1 } } },
    ],
  },
});
