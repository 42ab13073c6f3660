// The committed reference (client/docs/reference/, TypeDoc's Markdown) is the one the sources make today: a change to
// the client's exports or their comments without `npm run client:reference` fails here.
import { execFile } from 'node:child_process';
import { readFileSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../test/harness/process.js';

const clientDir = fileURLToPath(new URL('../', import.meta.url));
const committedDir = join(clientDir, 'docs/reference');
const madeDir = makeTempDir('client-reference');

/** Every file under `dir`, by its path inside it, with its text. */
function filesOf(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(dir, path)] = readFileSync(path, 'utf8');
  }
  return files;
}

describe('the generated reference', () => {
  afterAll(() => rmSync(madeDir, { recursive: true, force: true }));

  it('client/docs/reference is what TypeDoc makes from the sources now', async () => {
    const typedoc = join(dirname(createRequire(import.meta.url).resolve('typedoc/package.json')), 'bin/typedoc');
    await promisify(execFile)(process.execPath, [typedoc, '--options', 'typedoc.json', '--out', madeDir], { cwd: clientDir });
    const made = filesOf(madeDir);
    expect(Object.keys(made).length).toBeGreaterThan(0);
    expect(made['index.md']).toContain('createDataPlaneClient');
    expect(filesOf(committedDir), 'client/docs/reference is stale: run npm run client:reference').toEqual(made);
  }, 120_000);
});
