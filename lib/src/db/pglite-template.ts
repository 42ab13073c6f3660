// A fresh PGlite data dir made once, at build time (`npm run build`), and copied into every new data dir: initdb
// runs in a second WASM instance of its own and costs seconds and hundreds of MiB of peak memory on each first
// start, a copy tens of milliseconds (docs/decisions/0033). The template is initdb's output and nothing else, kept
// per PGlite version; a process that finds none for its version runs initdb as before.
import { chmodSync, constants, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Beside the compiled code, so the image's `dist` carries it; the same folder whether this runs from src or dist. */
const templatesDir = fileURLToPath(new URL('../../dist/pglite-template/', import.meta.url));

function pgliteVersion(): string {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  const manifest = JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')) as { version: string };
  return manifest.version;
}

/** Where the template for the installed PGlite is, made or not. */
export function pgliteTemplateDir(): string {
  return join(templatesDir, `pglite-${pgliteVersion()}`);
}

/**
 * Fills a new, empty data dir with the template; false (nothing done) when there is no template or the dir holds
 * anything already. The copy is made beside the dir and renamed into place, so a crash never leaves half a database
 * where a later start would take it for a whole one. The caller holds the data dir's lock.
 */
export function seedFromTemplate(dataDir: string, template = pgliteTemplateDir()): boolean {
  if (!existsSync(join(template, 'PG_VERSION'))) return false;
  if (existsSync(dataDir) && readdirSync(dataDir).length > 0) return false;
  const staging = `${dataDir}.seeding`;
  rmSync(staging, { recursive: true, force: true });
  cpSync(template, staging, { recursive: true, mode: constants.COPYFILE_FICLONE });
  renameSync(staging, dataDir); // an empty directory is replaced
  return true;
}

/** Makes the template for the installed PGlite unless it exists, and removes those of other versions. */
export async function ensurePgliteTemplate(): Promise<{ dir: string; created: boolean }> {
  const dir = pgliteTemplateDir();
  mkdirSync(templatesDir, { recursive: true });
  for (const name of readdirSync(templatesDir)) {
    if (join(templatesDir, name) !== dir) rmSync(join(templatesDir, name), { recursive: true, force: true });
  }
  if (existsSync(join(dir, 'PG_VERSION'))) return { dir, created: false };
  await makePgliteTemplate(dir);
  return { dir, created: true };
}

/** Runs initdb into `dir` (replaced whole, never left half made). */
export async function makePgliteTemplate(dir: string): Promise<void> {
  const { PGlite } = await import('@electric-sql/pglite');
  const staging = `${dir}.${process.pid}.partial`;
  rmSync(staging, { recursive: true, force: true });
  // Closing shuts the server down cleanly: a copy starts as a restart of this database would.
  await (await PGlite.create({ dataDir: staging })).close();
  // PGlite writes its files world-writable (0666); the template is read by whoever starts and written by no one.
  // Copies take these modes: still the starting user's own to write.
  for (const entry of readdirSync(staging, { recursive: true, withFileTypes: true })) {
    chmodSync(join(entry.parentPath, entry.name), entry.isDirectory() ? 0o755 : 0o644);
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(staging, dir);
}
