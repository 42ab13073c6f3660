// The interface reference committed in docs/api/ is what the code generates: a change to a route, a schema or a
// status that is not regenerated (`npm run docs:api`) fails here.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { apiReference, referenceDir } from '../hack/api-reference.js';

describe('docs/api', () => {
  it('holds the reference the code generates', async () => {
    const generated = await apiReference();
    for (const [name, text] of Object.entries(generated)) {
      expect(readFileSync(join(referenceDir, name), 'utf8'), `docs/api/${name} is stale: run npm run docs:api`).toBe(text);
    }
  }, 120_000);
});
