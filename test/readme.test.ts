// The README's first chat works as written: its shell block is run by bash, line for line, against a fresh
// `npm start` (started here, as its first line says) with a stand-in for the local model server it names, and every
// step answers what the README says it does. Only addresses change: the ports and data dir of this run, and the
// model server's URL.
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { freePort, makeTempDir, typeScriptNodeArgs } from './harness/process.js';
import { eventually } from './harness/eventually.js';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The shell block that follows a heading of the README. */
function blockUnder(heading: string): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf(heading));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error(`the README has no shell block under "${heading}"`);
  return block[1]!;
}
const firstChatBlock = () => blockUnder('### A first chat');

function run(command: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, output }));
  });
}

describe('the README', () => {
  const dataDir = makeTempDir('readme');
  let fake: FakeOpenAIServer;
  let server: ReturnType<typeof spawn>;
  let ports: { control: number; data: number };
  // The shop the browser section signs in to, on loopback (the README names https://shop.example.com).
  let shop: Server;
  let shopUrl: string;
  const logins: string[] = [];

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: 'ollama', chatModels: ['llama3.2'] });
    shop = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://shop');
      res.setHeader('Content-Type', 'text/html');
      const page = (title: string, body: string) =>
        res.end(`<!doctype html><title>${title}</title><style>body{margin:0} input{position:absolute;left:100px;width:300px;height:40px} #user{top:100px} #pass{top:180px} button{position:absolute;left:100px;top:260px}</style>${body}`);
      if (url.pathname === '/login') return page('Sign in', '<form action="/orders"><input id="user" name="user" aria-label="User"><input id="pass" name="pass" type="password" aria-label="Password"><button>Sign in</button></form>');
      if (url.pathname === '/orders') {
        logins.push(`${url.searchParams.get('user')}:${url.searchParams.get('pass')}`);
        return page('Your orders', '<h1>Your orders</h1><ul><li>Blue mug</li><li>Red kettle</li></ul>');
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve));
    shopUrl = `http://127.0.0.1:${(shop.address() as AddressInfo).port}`;
    ports = { control: await freePort(), data: await freePort() };
    // The block's first line, `AGENTPLANE_ALLOW_PRIVATE_URLS=true npm start`, in this run's ports and data dir.
    server = spawn(process.execPath, [...typeScriptNodeArgs, join(root, 'all-in-one', 'src', 'main.ts')], {
      cwd: root,
      env: {
        ...process.env,
        AGENTPLANE_ALLOW_PRIVATE_URLS: 'true',
        AGENTPLANE_DATA_DIR: dataDir,
        CONTROL_PORT: String(ports.control),
        DATA_PORT: String(ports.data),
        LOG_LEVEL: 'warn',
        // The shop stands in for a public site: the browser's guard lets this one private address through.
        BROWSER_ALLOWED_DESTINATIONS: new URL(shopUrl).host,
      },
      stdio: 'ignore',
    });
    await eventually(async () => (await fetch(`http://127.0.0.1:${ports.control}/ready`).catch(() => undefined))?.status === 200, { what: 'npm start to be ready', timeoutMs: 60_000 });
  }, 90_000);

  /** The first block's setup (sign in, project, key, provider), then a section's block, in this run's addresses. */
  const sectionScript = (heading: string) =>
    `${firstChatBlock().slice(0, firstChatBlock().indexOf('# 4.'))}\n${blockUnder(heading)}`
      .split('\n')
      .filter((line) => !/npm start\s+#\s*terminal 1/.test(line))
      .join('\n')
      .replaceAll('http://localhost:8080', `http://127.0.0.1:${ports.control}`)
      .replaceAll('http://localhost:8081', `http://127.0.0.1:${ports.data}`)
      .replaceAll('http://127.0.0.1:11434/v1', fake.url)
      .replaceAll('.agentplane/', `${dataDir}/`);

  afterAll(async () => {
    server?.kill('SIGTERM');
    await fake?.close();
    shop?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('walks a first chat as written: sign in, project, key, provider, token, a blocking and a streamed answer', async () => {
    const script = firstChatBlock()
      .split('\n')
      .filter((line) => !/npm start\s+#\s*terminal 1/.test(line))
      .join('\n')
      .replaceAll('http://localhost:8080', `http://127.0.0.1:${ports.control}`)
      .replaceAll('http://localhost:8081', `http://127.0.0.1:${ports.data}`)
      .replaceAll('http://127.0.0.1:11434/v1', fake.url)
      .replaceAll('.agentplane/', `${dataDir}/`);
    const { code, output } = await run('bash', ['-euo', 'pipefail', '-c', script], {});
    expect(code, output).toBe(0);
    // The blocking answer, then the stream's frames in order, each from the model server.
    // curl prints no newline after a body: the blocking answer runs up to the stream's first field.
    const start = output.indexOf('{"run_id"');
    expect(start, output).toBeGreaterThanOrEqual(0);
    const blocking = JSON.parse(output.slice(start, output.indexOf('retry:', start)).trim().replace(/\}[^}]*$/, '}')) as { content: string; finish_reason: null; session_id: string };
    expect(blocking).toMatchObject({ content: expect.any(String), finish_reason: null, session_id: expect.any(String) });
    expect(blocking.content.length).toBeGreaterThan(0);
    const events = [...output.matchAll(/^event: (\w+)$/gm)].map((match) => match[1]);
    expect(events[0]).toBe('start');
    expect(events).toContain('token');
    expect(events.at(-1)).toBe('done');
    expect(fake.chatRequests().length).toBeGreaterThanOrEqual(2);
  }, 120_000);

  it('walks the computer section as written: a sandbox, a file in, a command, the result out, and the agent\'s own', async () => {
    const script = sectionScript('### A computer: sandboxes for people and for the agent');
    // The model uses its computer as a model would: one command, then its answer.
    fake.script({ toolCalls: [{ id: 'c1', name: 'run_command', arguments: JSON.stringify({ command: 'wc -l < /usr/share/common-licenses/GPL-3' }) }] }, 'It has 674 lines.');
    const { code, output } = await run('bash', ['-euo', 'pipefail', '-c', `cd ${dataDir} && ${script}`], {});
    expect(code, output).toBe(0);
    expect(output).toContain('{"files":[{"path":"/workspace/sum.py","size":23}]}');
    expect(output).toMatch(/"exit_code": 0,\s*"stdout": "5050\\n"/);
    expect(output).toContain('5050\n"It has 674 lines."');
    const ran = fake.chatRequests().at(-1)!.messages.filter((message) => message.role === 'tool').at(-1) as { content: string };
    expect(ran.content).toBe('exit code 0\nstdout:\n674\n');
    expect(output).toMatch(/\{"name":"agent","state":"(paused|running)","session_id":"[0-9a-f-]{36}"\}/);
    expect(output).toContain('{"name":"scratch","state":"running","session_id":null}');
  }, 120_000);

  it.skipIf(!existsSync('/usr/bin/chromium'))("walks the browser section as written: the agent hands a page over, the person signs in on it, and the agent goes on", async () => {
    const script = sectionScript("### A browser: the agent's, and a hand-off to the person").replaceAll('https://shop.example.com', shopUrl);
    const tool = (request: { messages: { role: string; content?: unknown }[] }) => String(request.messages.filter((message) => message.role === 'tool').at(-1)?.content ?? '');
    fake.script(
      { toolCalls: [{ id: 'b1', name: 'browser_open', arguments: JSON.stringify({ url: `${shopUrl}/login` }) }] },
      { toolCalls: [{ id: 'b2', name: 'browser_handoff', arguments: JSON.stringify({ instructions: 'Please sign in; I will read your orders after.' }) }] },
      'done',
      (request) => (tool(request).includes('The browser is as they left it') ? { toolCalls: [{ id: 'b3', name: 'browser_read', arguments: '{}' }] } : `unexpected: ${tool(request)}`),
      (request) => (tool(request).includes('Red kettle') ? 'Your orders: a blue mug and a red kettle.' : `unexpected: ${tool(request)}`),
    );
    const { code, output } = await run('bash', ['-euo', 'pipefail', '-c', `cd ${dataDir} && ${script}`], {});
    expect(code, output).toBe(0);
    expect(output).toContain(`{"requires_action":true,"handoffs":[{"tool_call_id":"b2","instructions":"Please sign in; I will read your orders after.","read_only":false,"url":"${shopUrl}/login"}]}`);
    expect(readFileSync(join(dataDir, 'page.jpg')).subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
    expect(logins).toEqual(['alice:correct horse']);
    expect(output).toContain(`{"title":"Your orders","url":"${shopUrl}/orders?user=alice&pass=correct+horse"}`);
    expect(output).toContain('{"result":"done"}');
    expect(output).toContain('"Your orders: a blue mug and a red kettle."');
    // The password the person typed reached no model (npm start's loader, not the tests', runs the redaction here).
    expect(JSON.stringify(fake.chatRequests())).not.toContain('correct horse');
  }, 120_000);
});
