// The README's handlers work as written: its Node and Python blocks under "Webhook tools" and under "Events" are run
// as they stand (Node and python3, nothing installed) and sent what the runtime sends, signed as it signs. A tool
// handler answers a signed call, also during a rotation's two signatures, and refuses a tampered body or a wrong
// secret; an event receiver takes a signed event once, and refuses a tampered, stale or wrongly signed one.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { eventSignature, signatureHeader } from '@agentplane/lib/crypto/signatures';
import { eventually } from './harness/eventually.js';
import { freePort, makeTempDir } from './harness/process.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const SECRET = 'whsec_readme-handler-secret-0001';

/** The code block of `language` in the README's section headed `heading`. */
function readmeBlock(heading: string, language: 'js' | 'python'): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const start = readme.indexOf(`### ${heading}`);
  const section = readme.slice(start, readme.indexOf('\n### ', start + 4));
  const block = new RegExp('```' + language + '\\n([\\s\\S]*?)```').exec(section);
  if (!block) throw new Error(`the README has no ${language} block under "${heading}"`);
  return block[1]!;
}

/** Starts a README block as a server on a free port; answers its URL. */
async function serve(heading: string, language: 'js' | 'python', file: string, command: string, probe: (url: string) => Promise<boolean>): Promise<string> {
  const path = join(dir, file);
  writeFileSync(path, readmeBlock(heading, language));
  const port = await freePort();
  let output = '';
  const child = spawn(command, [path], { env: { ...process.env, PORT: String(port), WEBHOOK_SECRET: SECRET }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = `http://127.0.0.1:${port}/`;
  await eventually(() => probe(url).catch(() => false), { what: `the ${language} ${file} (${output})` });
  return url;
}

const dir = makeTempDir('readme-handlers');
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

describe.each([
  { language: 'js' as const, file: 'handler.mjs', command: process.execPath },
  { language: 'python' as const, file: 'handler.py', command: 'python3' },
])("the README's $language webhook handler", ({ language, file, command }) => {
  it('answers a signed call, under either secret of a rotation, and refuses a tampered or wrongly signed one', async () => {
    const body = JSON.stringify({ tool: 'lookup_order', arguments: { order_id: 'A-1' }, subject: 'acme:alice', scope: 'acme', roles: [], tenant_id: 't', session_id: 's' });
    let url = '';
    const post = (signature: string, sent = body) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-service-signature': signature }, body: sent });
    url = await serve('Webhook tools', language, file, command, async (at) => {
      url = at;
      return (await post(signatureHeader([SECRET], body))).status === 200;
    });

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

describe.each([
  { language: 'js' as const, file: 'receiver.mjs', command: process.execPath },
  { language: 'python' as const, file: 'receiver.py', command: 'python3' },
])("the README's $language event receiver", ({ language, file, command }) => {
  it('takes a signed event once, and refuses a tampered, stale or wrongly signed one', async () => {
    let url = '';
    const event = (id: string) => JSON.stringify({ id, type: 'turn.stopped', created_at: new Date().toISOString(), data: { run_id: 'run_1', finish_reason: null } });
    const send = (id: string, options: { body?: string; timestamp?: number; secret?: string } = {}) => {
      // Built once: the event carries the time to the millisecond, so a second build could differ from what is signed.
      const signed = event(id);
      const body = options.body ?? signed;
      const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
      return fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-delivery-id': id,
          'x-delivery-timestamp': String(timestamp),
          'x-signature': eventSignature(options.secret ?? SECRET, id, timestamp, signed),
        },
        body,
      });
    };
    url = await serve('Events', language, file, command, async (at) => {
      url = at;
      return (await send(randomUUID())).status === 204;
    });
    const id = randomUUID();
    expect((await send(id)).status).toBe(204);
    // The same event again (a retry, or a replay): taken once.
    expect((await send(id)).status).toBe(200);
    expect((await send(randomUUID(), { body: event('tampered') })).status).toBe(401);
    expect((await send(randomUUID(), { timestamp: Math.floor(Date.now() / 1000) - 3600 })).status).toBe(401);
    expect((await send(randomUUID(), { secret: 'whsec_someone-else' })).status).toBe(401);
  });
});
