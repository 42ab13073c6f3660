import { defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';

// Workspace packages resolve to their TypeScript sources, as `npm start` resolves them (tsconfig.json says why).
// Vitest also hands these to its workers as node `--conditions`, so `module` (bundler-only ESM builds that node
// cannot load) stays out, as in vitest's own default.
const conditions = ['@agentplane/source', ...defaultServerConditions.filter((c) => c !== 'module')];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: ['lib/**/*.test.ts', 'runtime/**/*.test.ts', 'control-api/**/*.test.ts', 'operator/**/*.test.ts', 'all-in-one/**/*.test.ts', 'client/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**', 'test/bench/**'],
    // Integration suites start real servers; give them room on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
