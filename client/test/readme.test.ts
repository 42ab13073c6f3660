// client/README.md's quickstart works as written: its server block mints with a real project key against a real
// control plane, and its browser block streams a chat from a real runtime through that server. Only addresses change.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from '../../test/fakes/openai-server.js';
import { eventually } from '../../test/harness/eventually.js';
import { freePort, typeScriptNodeArgs } from '../../test/harness/process.js';
import { startTestProject, type TestProject } from '../../test/harness/project.js';

const clientDir = fileURLToPath(new URL('..', import.meta.url));

function block(kind: 'server' | 'browser'): string {
  const readme = readFileSync(join(clientDir, 'README.md'), 'utf8');
  const found = new RegExp('```ts ' + kind + '\\n([\\s\\S]*?)```').exec(readme);
  if (!found) throw new Error(`client/README.md has no \`\`\`ts ${kind} block`);
  return found[1]!;
}

describe('client/README.md', () => {
  let fake: FakeOpenAIServer;
  let project: TestProject;
  let server: ChildProcess | undefined;
  // Inside the checkout, so the blocks resolve @agentplane/client as an application's code would.
  const dir = mkdtempSync(join(clientDir, '.readme-'));

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-readme-0001', chatModels: ['gpt-4o-mini'] });
    project = await startTestProject({ capabilities: ['chat'], provider: fake, model: 'gpt-4o-mini' });
    await project.pushed();
  });
  afterAll(async () => {
    server?.kill('SIGTERM');
    await project?.stop();
    await fake?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs the quickstart: a server that mints, a browser that chats', async () => {
    const tokenPort = await freePort();
    const localize = (code: string) =>
      code
        .replaceAll('http://localhost:8080', project.api.url)
        .replaceAll('http://localhost:8081', project.rt.url)
        .replaceAll('http://localhost:3000', `http://127.0.0.1:${tokenPort}`)
        .replaceAll('.listen(3000)', `.listen(${tokenPort}, '127.0.0.1')`);
    writeFileSync(join(dir, 'server.ts'), localize(block('server')));
    writeFileSync(join(dir, 'browser.ts'), localize(block('browser')));
    const env = { ...process.env, AGENTPLANE_PROJECT_KEY: project.adminKey, AGENTPLANE_PROJECT_ID: project.projectId };
    server = spawn(process.execPath, [...typeScriptNodeArgs, join(dir, 'server.ts')], { env, stdio: 'ignore' });
    await eventually(async () => (await fetch(`http://127.0.0.1:${tokenPort}/token`, { method: 'POST' }).catch(() => undefined))?.status === 200, { what: 'the README server to mint' });

    fake.script('Hello from the agent, friend.');
    const output = await new Promise<{ code: number | null; text: string }>((resolve, reject) => {
      const browser = spawn(process.execPath, [...typeScriptNodeArgs, join(dir, 'browser.ts')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      browser.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
      browser.stderr.on('data', (chunk: Buffer) => (text += chunk.toString()));
      browser.on('error', reject);
      browser.on('exit', (code) => resolve({ code, text }));
    });
    expect(output.code, output.text).toBe(0);
    expect(output.text).toMatch(/^answer: Hello from the agent, friend\. \| session [0-9a-f-]{36}$/m);
    expect(output.text).toContain('streamed: Hello from the agent, friend.');
  }, 90_000);
});
