// Builds the console into dist/ for the control plane to serve at /console. Every script is a file (no inline
// script, so the strict Content-Security-Policy holds) and nothing is fetched from elsewhere at run time.
import { defaultClientConditions, defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

export default defineConfig({
  base: '/console/',
  plugins: [react()],
  // @agentplane/client bundled from its TypeScript sources, as the rest of the workspace resolves it.
  resolve: { conditions: ['@agentplane/source', ...defaultClientConditions] },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The preload polyfill would be one more script; every browser the console supports has modulepreload.
    modulePreload: { polyfill: false },
    // No inlined assets: a data: URL script or font would need the policy widened.
    assetsInlineLimit: 0,
    target: 'es2022',
  },
});
