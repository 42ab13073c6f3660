// The README's webhook-tool handlers work as written: its Node and Python blocks under "Webhook tools" are run as
// they stand (Node and python3, nothing installed), each is sent calls signed as the runtime signs them, and each
// answers a signed call, also during a rotation's two signatures, and refuses a tampered body or a wrong secret.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { signatureHeader } from '@agentplane/lib/crypto/signatures';
import { eventually } from './harness/eventually.js';
import { freePort, makeTempDir } from './harness/process.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const SECRET = 'whsec_readme-handler-secret-0001';

/** The code block of `language` in the README's webhook tools section. */
function readmeBlock(language: 'js' | 'python'): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const start = readme.indexOf('### Webhook tools');
  const section = readme.slice(start, readme.indexOf('\n## ', start));
  const block = new RegExp('```' + language + '\\n([\\s\\S]*?)```').exec(section);
  if (!block) throw new Error(`the README has no ${language} block under "Webhook tools"`);
  return block[1]!;
}

const dir = makeTempDir('readme-handlers');
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGTERM');
});

describe.each([
  { language: 'js' as const, file: 'handler.mjs', command: process.execPath },
  { language: 'python' as const, file: 'handler.py', command: 'python3' },
])("the README's $language webhook handler", ({ language, file, command }) => {
  it('answers a signed call, under either secret of a rotation, and refuses a tampered or wrongly signed one', async () => {
    const path = join(dir, file);
    writeFileSync(path, readmeBlock(language));
    const port = await freePort();
    let output = '';
    const child = spawn(command, [path], { env: { ...process.env, PORT: String(port), WEBHOOK_SECRET: SECRET }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const url = `http://127.0.0.1:${port}/`;
    const body = JSON.stringify({ tool: 'lookup_order', arguments: { order_id: 'A-1' }, subject: 'acme:alice', scope: 'acme', roles: [], tenant_id: 't', session_id: 's' });
    const post = (signature: string, sent = body) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-service-signature': signature }, body: sent });
    await eventually(async () => (await post(signatureHeader([SECRET], body)).catch(() => undefined))?.status === 200, { what: `the ${language} handler (${output})` });

    const answered = await post(signatureHeader([SECRET], body));
    expect(answered.status).toBe(200);
    expect(await answered.text()).toBe('Order A-1 shipped on 3 March.');
    // During a rotation the header holds the new secret's signature and the old one's: either matching is enough.
    expect((await post(signatureHeader(['whsec_the-new-one', SECRET], body))).status).toBe(200);
    expect((await post(signatureHeader([SECRET], body), body.replace('A-1', 'A-2'))).status).toBe(401);
    expect((await post(signatureHeader(['whsec_someone-else'], body))).status).toBe(401);
    expect((await post(''))).toHaveProperty('status', 401);
  });
});
