import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['apps/*/test/**/*.test.ts', 'packages/*/test/**/*.test.ts', 'packages/*/src/**/*.test.ts'],
    // The embedded ClickHouse engine allows one data path per process: forks give each test
    // file its own process and so its own engine.
    pool: 'forks',
    maxWorkers: 2,
    globalSetup: ['./test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    reporters: ['default'],
  },
});
