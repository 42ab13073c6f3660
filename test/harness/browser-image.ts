// The browser image the test kubelet runs (docs/decisions/0092): hack/browser-image.sh's base (Debian bookworm with
// Debian's chromium, Node, the pinned playwright-core and hack/entrypoint.sh) plus this checkout's browser server,
// bundled with esbuild into the file `entrypoint.sh browser` runs and added as one more layer with `umoci insert`.
// So the Pod runs the code under test, and a change to it needs no rebuild of the base.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { cacheDir, makeTempDir, servicesRequired } from './process.js';

/** The name the built image is imported under; pull policy Never. */
export const browserImage = 'agentplane.local/browser:test';

/** hack/browser-image.sh's BASE_REVISION: bumped there when the base's content changes. */
const BASE_REVISION = 1;

const serverMain = fileURLToPath(new URL('../../runtime/src/browsers/server/main.ts', import.meta.url));

export interface BrowserBase {
  layout: string;
  tag: string;
}

/**
 * The base layout hack/browser-image.sh built for this Node and playwright-core, or null when it is missing (one
 * line says how to build it, and the suite skips; under AGENTPLANE_REQUIRE_SERVICES=1 it throws).
 */
export function browserBase(): BrowserBase | null {
  const playwright = (createRequire(import.meta.url)('playwright-core/package.json') as { version: string }).version;
  const tag = `bookworm-node${process.versions.node}-pw${playwright}-${BASE_REVISION}`;
  const layout = join(cacheDir, 'images', `agentplane-browser-base-${tag}`);
  if (existsSync(join(layout, 'index.json'))) return { layout, tag };
  const line = `browser image base ${tag} not found at ${layout}: run 'bash hack/test-deps.sh' as root to build it`;
  if (servicesRequired) throw new Error(`${line} (AGENTPLANE_REQUIRE_SERVICES=1)`);
  console.warn(`skipping: ${line}`);
  return null;
}

/** Builds the image from `base` and this checkout's browser server; returns the OCI archive `ctr images import` takes. */
export async function buildBrowserImage(base: BrowserBase): Promise<{ archive: string; remove(): void }> {
  const work = makeTempDir('browser-image');
  const dist = join(work, 'dist');
  await build({
    entryPoints: [serverMain],
    outfile: join(dist, 'browsers', 'server', 'main.js'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    // The base carries playwright-core as installed (its driver files are read from its folder at run time).
    external: ['playwright-core'],
    conditions: ['@agentplane/source'],
    // Bundled CommonJS packages call require(); an ES module has none of its own.
    banner: { js: "import { createRequire as __agentplaneRequire } from 'node:module'; const require = __agentplaneRequire(import.meta.url);" },
    logLevel: 'error',
  });
  const layout = join(work, 'oci');
  // Blobs are content-addressed and never rewritten: hard links cost nothing. The index is rewritten by umoci, so it
  // is a copy of its own.
  execFileSync('cp', ['-al', base.layout, layout]);
  rmSync(join(layout, 'index.json'));
  copyFileSync(join(base.layout, 'index.json'), join(layout, 'index.json'));
  execFileSync('umoci', ['insert', '--image', `${layout}:${base.tag}`, dist, '/app/runtime/dist'], { stdio: 'pipe' });
  const indexPath = join(layout, 'index.json');
  const index = JSON.parse(readFileSync(indexPath, 'utf8')) as { manifests: Array<{ annotations?: Record<string, string> }> };
  const manifest = index.manifests.find((entry) => entry.annotations?.['org.opencontainers.image.ref.name'] === base.tag);
  if (!manifest) throw new Error(`no manifest tagged ${base.tag} in ${indexPath}`);
  index.manifests = [{ ...manifest, annotations: { ...manifest.annotations, 'io.containerd.image.name': browserImage } }];
  writeFileSync(indexPath, JSON.stringify(index));
  const archive = join(work, 'browser.oci.tar');
  execFileSync('tar', ['-C', layout, '-cf', archive, '.']);
  return { archive, remove: () => rmSync(work, { recursive: true, force: true }) };
}
