import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const source = (path: string) => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  // The package's own entry points, for examples/ (written as a user writes them): the sources, no build needed.
  resolve: {
    alias: [
      { find: /^steerbot$/, replacement: source('./app/index.ts') },
      { find: /^steerbot\/runner$/, replacement: source('./runner/index.ts') },
      { find: /^steerbot\/channel$/, replacement: source('./src/channel.ts') },
      { find: /^steerbot\/testing$/, replacement: source('./testing/index.ts') },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
