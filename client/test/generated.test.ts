// The committed types are the ones the OpenAPI documents make today: a change to a document without
// `npm run client:generate` fails here.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { GENERATED, generatedDir, generatedSource } from '../scripts/generate.js';

describe('the generated types', () => {
  it.each(GENERATED)('client/src/generated/$file is made from $document as it is now', async ({ file, document }) => {
    const committed = await readFile(`${generatedDir}${file}`, 'utf8');
    expect(committed === (await generatedSource(document)), `client/src/generated/${file} is stale: run npm run client:generate`).toBe(true);
  });
});
