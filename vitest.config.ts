import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['lib/**/*.test.ts', 'runtime/**/*.test.ts', 'control-api/**/*.test.ts', 'operator/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['node_modules/**', 'test/bench/**'],
    // Integration suites start real servers; give them room on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
