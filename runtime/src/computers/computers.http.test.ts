// Sandboxes through HTTP on the real local host (bubblewrap, cgroups, an ext4 image per /workspace), in both
// setups: made, used, paused, resumed, deleted; files in and out with every path that would leave /workspace
// refused; who may see and who may use; the project's count held under concurrency; the idle pause and the
// lifetime; every exec in the audit log without its output; a tenant's erase and a subject's forget.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import { eventually } from '@agentplane/test/harness/eventually';
import { availableSetups, configuredTenant, ScaleServices, startTestRuntime, type TestRuntime, type TestTenant } from '@agentplane/test/harness/runtime';
import { allEvents } from '@agentplane/test/harness/sse';
import { tarOf } from '@agentplane/test/harness/tar';

const ceiling = { capabilities: ['chat', 'computer'] };


describe.each(availableSetups())('sandboxes (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let rt: TestRuntime;
  let t: TestTenant;
  let alice: string;

  const token = (grant: Partial<AccessTokenGrant> = {}) => t.mint({ sub: 'acme:alice', scope: 'acme:alice', ...grant });
  const call = (path: string, tok: string, init: RequestInit = {}) => rt.endUser(path, tok, init);
  const post = (path: string, tok: string, body: unknown = {}) => call(path, tok, { method: 'POST', body: JSON.stringify(body) });
  const create = async (tok = alice) => {
    const res = await post('/computers/sessions', tok, { name: 'box' });
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as { id: string; state: string };
  };
  const exec = async (id: string, body: unknown, tok = alice) => {
    const res = await post(`/computers/sessions/${id}/exec`, tok, body);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const upload = (id: string, form: FormData, tok = alice) => call(`/computers/sessions/${id}/files`, tok, { method: 'POST', body: form });

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    rt = await startTestRuntime({ env: { ...((await services?.env()) ?? {}), COMPUTER_HOST: 'local', COMPUTER_SWEEP_MS: '100' } });
    t = await configuredTenant(rt, { ceiling });
    await t.reconfigure({ computer: { max_sandboxes: 4, memory_mib: 256, disk_mib: 64, command_timeout_seconds: 20 } });
    alice = await token();
  });
  // Each test starts with the project's count free: what the last one made is deleted.
  afterEach(async () => {
    const listed = (await (await call('/computers/sessions?limit=100', alice)).json()) as { sandboxes: Array<{ id: string }> };
    for (const box of listed.sandboxes) await call(`/computers/sessions/${box.id}`, alice, { method: 'DELETE' });
  });
  afterAll(async () => {
    await rt?.stop();
    await services?.stop();
  });

  it('describes its host and the project\'s settings, and refuses every route without `computer`', async () => {
    const host = await call('/computers/host', alice);
    expect(host.status).toBe(200);
    expect(await host.json()).toMatchObject({
      kind: 'local',
      network: 'none',
      workspace: '/workspace',
      settings: { max_sandboxes: 4, memory_mib: 256, disk_mib: 64, command_timeout_seconds: 20 },
      limits: { exec_output_bytes: 1048576 },
    });
    const chatOnly = await token({ capabilities: ['chat'] });
    const id = randomUUID();
    for (const [method, path] of [
      ['GET', '/computers/host'],
      ['POST', '/computers/sessions'],
      ['GET', '/computers/sessions'],
      ['GET', `/computers/sessions/${id}`],
      ['DELETE', `/computers/sessions/${id}`],
      ['POST', `/computers/sessions/${id}/pause`],
      ['POST', `/computers/sessions/${id}/resume`],
      ['POST', `/computers/sessions/${id}/exec`],
      ['GET', `/computers/sessions/${id}/files?path=a`],
    ] as const) {
      const res = await call(path, chatOnly, { method, ...(method === 'POST' ? { body: '{}' } : {}) });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(((await res.json()) as { code: string }).code).toBe('capability_denied');
    }
  });

  it('makes a sandbox and runs commands in it: a shell line, an argv, input, environment, directory and timeout', async () => {
    const box = await create();
    expect(box.state).toBe('running');
    const shell = await exec(box.id, { command: 'id -un; pwd; echo "$WHO"; cat; mkdir -p d; exit 7', env: { WHO: 'me' }, stdin: 'piped\n' });
    expect(shell).toMatchObject({ status: 200, body: { exit_code: 7, stdout: 'sandbox\n/workspace\nme\npiped\n', timed_out: false, stdout_truncated: false } });
    const argv = await exec(box.id, { command: ['/bin/echo', 'a b', '$HOME'], cwd: 'd' });
    expect(argv.body).toMatchObject({ exit_code: 0, stdout: 'a b $HOME\n' });
    expect((await exec(box.id, { command: 'pwd', cwd: '/workspace/d' })).body).toMatchObject({ stdout: '/workspace/d\n' });
    const slow = await exec(box.id, { command: 'sleep 30 & sleep 30', timeout_seconds: 1 });
    expect(slow.body).toMatchObject({ timed_out: true, exit_code: null });
    // The project's command timeout bounds what a caller asks.
    const tooLong = await exec(box.id, { command: 'true', timeout_seconds: 21 });
    expect(tooLong).toMatchObject({ status: 400, body: { code: 'timeout_too_long' } });
    for (const cwd of ['/etc', '../x', 'a/../../b']) expect((await exec(box.id, { command: 'true', cwd })).status, cwd).toBe(400);
    const big = await exec(box.id, { command: 'head -c 2000000 /dev/zero | tr "\\0" x' });
    expect(big.body).toMatchObject({ stdout_truncated: true, exit_code: 0 });
    expect((big.body.stdout as string).length).toBe(1024 * 1024);
    const got = await call(`/computers/sessions/${box.id}`, alice);
    expect(await got.json()).toMatchObject({ id: box.id, state: 'running', exec_count: 5, usage: { memory_bytes: expect.any(Number), disk_bytes: expect.any(Number) } });
  });

  it('streams output frames and then one exit frame', async () => {
    const box = await create();
    const res = await call(`/computers/sessions/${box.id}/exec`, alice, {
      method: 'POST',
      headers: { accept: 'text/event-stream' },
      body: JSON.stringify({ command: 'echo one; sleep 0.3; echo two >&2; echo three' }),
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = await allEvents(res);
    expect(events.at(-1)).toMatchObject({ event: 'exit', data: { exit_code: 0, timed_out: false } });
    const out = events.filter((event) => event.event === 'stdout').map((event) => (event.data as { data: string }).data).join('');
    const err = events.filter((event) => event.event === 'stderr').map((event) => (event.data as { data: string }).data).join('');
    expect(out).toBe('one\nthree\n');
    expect(err).toBe('two\n');
    expect(events.findIndex((event) => event.event === 'stdout')).toBeLessThan(events.findIndex((event) => event.event === 'stderr'));
  });

  it('moves files in and out, and refuses every path that would leave /workspace, writing nothing', async () => {
    const box = await create();
    const one = new FormData();
    one.append('path', 'notes/hello.txt');
    one.append('file', new Blob(['hello file']), 'ignored.txt');
    const wrote = await upload(box.id, one);
    expect(wrote.status, await wrote.clone().text()).toBe(201);
    expect(await wrote.json()).toEqual({ files: [{ path: '/workspace/notes/hello.txt', size: 10 }] });
    const several = new FormData();
    several.append('files', new Blob(['a']), 'src/a.py');
    several.append('files', new Blob(['bb']), 'src/b.py');
    expect((await upload(box.id, several)).status).toBe(201);
    const archive = new FormData();
    archive.append('unpack', 'true');
    archive.append('path', 'unpacked');
    archive.append('file', new Blob([await tarOf([{ name: 'x/y.txt', body: 'deep' }, { name: 'z.txt', body: 'top' }])]), 'a.tar');
    expect((await upload(box.id, archive)).status).toBe(201);
    expect((await exec(box.id, { command: 'cat notes/hello.txt src/a.py src/b.py unpacked/x/y.txt unpacked/z.txt' })).body.stdout).toBe('hello fileabbdeeptop');

    const download = await call(`/computers/sessions/${box.id}/files?path=notes/hello.txt`, alice);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('application/octet-stream');
    expect(download.headers.get('content-disposition')).toContain('hello.txt');
    expect(await download.text()).toBe('hello file');
    const listing = await call(`/computers/sessions/${box.id}/files?path=/workspace/src`, alice);
    expect(await listing.json()).toEqual({ path: '/workspace/src', entries: [{ name: 'a.py', type: 'file', size: 1 }, { name: 'b.py', type: 'file', size: 2 }] });
    expect((await call(`/computers/sessions/${box.id}/files?path=missing.txt`, alice)).status).toBe(404);

    // Out of bounds, by name: refused before anything runs.
    for (const path of ['../escape', '/etc/passwd', 'a/../../b']) {
      const form = new FormData();
      form.append('path', path);
      form.append('file', new Blob(['x']), 'x');
      const res = await upload(box.id, form);
      expect(res.status, path).toBe(400);
      expect(((await res.json()) as { code: string }).code).toBe('unsafe_path');
      const read = await call(`/computers/sessions/${box.id}/files?path=${encodeURIComponent(path)}`, alice);
      expect(read.status, `${path}: ${await read.clone().text()}`).toBe(400);
    }
    // Out of bounds through a link the sandbox made: refused, both ways.
    await exec(box.id, { command: 'ln -s /etc out; ln -s /tmp tmplink' });
    const through = new FormData();
    through.append('path', 'tmplink/planted');
    through.append('file', new Blob(['x']), 'x');
    const refused = await upload(box.id, through);
    expect(refused.status).toBe(400);
    expect((await exec(box.id, { command: 'ls /tmp' })).body.stdout).toBe('');
    const read = await call(`/computers/sessions/${box.id}/files?path=out/hostname`, alice);
    expect(read.status).toBe(400);
    // An archive holding a link, or a path leaving it: refused whole, nothing unpacked.
    for (const entries of [
      [{ name: 'ok.txt', body: 'fine' }, { name: 'evil', type: 'symlink' as const, linkname: '/etc' }, { name: 'evil/x', body: 'x' }],
      [{ name: 'ok.txt', body: 'fine' }, { name: '../../escape.txt', body: 'x' }],
    ]) {
      const form = new FormData();
      form.append('unpack', 'true');
      form.append('path', 'hostile');
      form.append('file', new Blob([await tarOf(entries)]), 'evil.tar');
      const res = await upload(box.id, form);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { code: string }).code).toBe('unsafe_path');
    }
    expect((await exec(box.id, { command: 'ls hostile 2>&1 | head -1' })).body.stdout).toContain('No such file');
  });

  it('streams a download as fast as its reader takes it, and stops reading the file when the reader goes away', async () => {
    const box = await create();
    await exec(box.id, { command: 'head -c 40000000 /dev/zero > big' });
    // How far the sandbox's `cat` of the download has read the file (builtins only: our own command runs no cat).
    const readSoFar = async () =>
      (
        await exec(box.id, {
          command:
            'for p in /proc/[0-9]*; do read c < $p/comm 2>/dev/null || continue; [ "$c" = cat ] || continue; [ "$(readlink $p/fd/3)" = /workspace/big ] || continue; while read k v; do [ "$k" = pos: ] && echo $v; done < $p/fdinfo/3; done',
        })
      ).body.stdout as string;
    const slow = await call(`/computers/sessions/${box.id}/files?path=big`, alice);
    expect(slow.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    // Nothing read by the client yet: the file is read only as far as the sockets and pipes between hold.
    const held = Number(await readSoFar());
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(20_000_000);
    expect((await slow.arrayBuffer()).byteLength).toBe(40_000_000);

    const controller = new AbortController();
    const left = await call(`/computers/sessions/${box.id}/files?path=big`, alice, { signal: controller.signal });
    expect(left.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 300));
    controller.abort();
    await eventually(async () => (await readSoFar()) === '', { what: "the download's cat ended" });
  });

  it('pauses and resumes: exec while paused is 409 with the fix, a download still works, the files and processes are kept', async () => {
    const box = await create();
    await exec(box.id, { command: 'echo kept > f; nohup sleep 600 >/dev/null 2>&1 &' });
    const paused = await post(`/computers/sessions/${box.id}/pause`, alice);
    expect(await paused.json()).toMatchObject({ state: 'paused', paused_at: expect.any(String) });
    const refused = await exec(box.id, { command: 'true' });
    expect(refused).toMatchObject({ status: 409, body: { code: 'sandbox_paused' } });
    expect(refused.body.detail).toContain(`POST /computers/sessions/${box.id}/resume`);
    const upload409 = new FormData();
    upload409.append('path', 'g');
    upload409.append('file', new Blob(['g']), 'g');
    expect((await upload(box.id, upload409)).status).toBe(409);
    expect(await (await call(`/computers/sessions/${box.id}/files?path=f`, alice)).text()).toBe('kept\n');
    expect(await (await call(`/computers/sessions/${box.id}`, alice)).json()).toMatchObject({ state: 'paused' });
    expect(await (await post(`/computers/sessions/${box.id}/resume`, alice)).json()).toMatchObject({ state: 'running', paused_at: null });
    expect((await exec(box.id, { command: 'cat f; pgrep -c -f "[s]leep 600"' })).body.stdout).toBe('kept\n1\n');
  });

  it('seeing is not owning: another user gets 404, a privileged reader reads and downloads but may not use or change', async () => {
    const box = await create();
    await exec(box.id, { command: 'echo secret > s.txt' });
    const bob = await t.mint({ sub: 'acme:bob', scope: 'acme:bob' });
    const reader = await t.mint({ sub: 'acme:boss', scope: 'acme', roles: ['admin'] });
    const stranger = await (await configuredTenant(rt, { ceiling })).mint({ sub: 'acme:alice', scope: 'acme:alice' });
    for (const tok of [bob, stranger]) {
      expect((await call(`/computers/sessions/${box.id}`, tok)).status).toBe(404);
      expect((await exec(box.id, { command: 'true' }, tok)).status).toBe(404);
      // Not visible is answered before the body is read: an invalid one gets the same 404.
      expect((await exec(box.id, { command: 42, bogus: true }, tok)).status).toBe(404);
      expect((await call(`/computers/sessions/${box.id}/files?path=s.txt`, tok)).status).toBe(404);
      expect((await post(`/computers/sessions/${box.id}/pause`, tok)).status).toBe(404);
      expect((await call(`/computers/sessions/${box.id}`, tok, { method: 'DELETE' })).status).toBe(404);
      const listed = (await (await call('/computers/sessions', tok)).json()) as { sandboxes: Array<{ id: string }> };
      expect(listed.sandboxes.map((s) => s.id)).not.toContain(box.id);
    }
    expect(await (await call(`/computers/sessions/${box.id}`, reader)).json()).toMatchObject({ id: box.id, owner: 'acme:alice' });
    expect(((await (await call('/computers/sessions', reader)).json()) as { sandboxes: Array<{ id: string }> }).sandboxes.map((s) => s.id)).toContain(box.id);
    expect(await (await call(`/computers/sessions/${box.id}/files?path=s.txt`, reader)).text()).toBe('secret\n');
    for (const res of [
      await post(`/computers/sessions/${box.id}/exec`, reader, { command: 'true' }),
      await post(`/computers/sessions/${box.id}/exec`, reader, { command: 42, bogus: true }),
      await post(`/computers/sessions/${box.id}/pause`, reader),
      await post(`/computers/sessions/${box.id}/resume`, reader),
      await call(`/computers/sessions/${box.id}`, reader, { method: 'DELETE' }),
      await upload(box.id, new FormData(), reader),
    ]) {
      expect(res.status).toBe(403);
      expect(((await res.json()) as { code: string }).code).toBe('not_owner');
    }
    expect(await (await call(`/computers/sessions/${box.id}`, alice)).json()).toMatchObject({ state: 'running' });
  });

  it('holds the project\'s count under concurrent creates, and deleting frees a place', async () => {
    const listed = (await (await call('/computers/sessions?limit=100', alice)).json()) as { sandboxes: Array<{ id: string }> };
    for (const box of listed.sandboxes) await call(`/computers/sessions/${box.id}`, alice, { method: 'DELETE' });
    const answers = await Promise.all(Array.from({ length: 8 }, () => post('/computers/sessions', alice, {})));
    const statuses = answers.map((res) => res.status).sort();
    expect(statuses).toEqual([201, 201, 201, 201, 409, 409, 409, 409]);
    const refused = (await answers.find((res) => res.status === 409)!.json()) as { code: string };
    expect(refused.code).toBe('too_many_sandboxes');
    const made = (await Promise.all(answers.filter((res) => res.status === 201).map((res) => res.json()))) as Array<{ id: string }>;
    const deleted = await call(`/computers/sessions/${made[0]!.id}`, alice, { method: 'DELETE' });
    expect(await deleted.json()).toMatchObject({ state: 'deleted', deleted_at: expect.any(String) });
    expect((await exec(made[0]!.id, { command: 'true' })).body).toMatchObject({ code: 'sandbox_deleted' });
    expect((await post('/computers/sessions', alice, {})).status).toBe(201);
    for (const box of made.slice(1)) await call(`/computers/sessions/${box.id}`, alice, { method: 'DELETE' });
  });

  it('pauses an idle sandbox and stops one past its lifetime, whose files stay downloadable', async () => {
    const listed = (await (await call('/computers/sessions?limit=100', alice)).json()) as { sandboxes: Array<{ id: string }> };
    for (const box of listed.sandboxes) await call(`/computers/sessions/${box.id}`, alice, { method: 'DELETE' });
    const idle = await create();
    const old = await create();
    await exec(old.id, { command: 'echo made > result.txt' });
    const db = rt.runtime.database.db;
    await db.updateTable('sandboxes').set({ last_active_at: new Date(Date.now() - 3_600_000) }).where('id', '=', idle.id).execute();
    await db.updateTable('sandboxes').set({ expires_at: new Date(Date.now() - 1_000) }).where('id', '=', old.id).execute();
    await eventually(async () => ((await (await call(`/computers/sessions/${idle.id}`, alice)).json()) as { state: string }).state === 'paused');
    await eventually(async () => ((await (await call(`/computers/sessions/${old.id}`, alice)).json()) as { state: string }).state === 'stopped');
    expect((await post(`/computers/sessions/${old.id}/resume`, alice)).status).toBe(409);
    expect(await (await call(`/computers/sessions/${old.id}/files?path=result.txt`, alice)).text()).toBe('made\n');
    expect(await (await call(`/computers/sessions/${old.id}`, alice)).json()).toMatchObject({ state: 'stopped' });
    for (const box of [idle, old]) await call(`/computers/sessions/${box.id}`, alice, { method: 'DELETE' });
  });

  it('writes every exec to the audit log: who, which sandbox, the command, exit code and duration, never the output', async () => {
    const box = await create();
    await exec(box.id, { command: 'echo the-output-itself; exit 3' });
    const admin = await t.mint({ sub: 'acme:boss', scope: 'acme', roles: ['admin'] });
    const entry = await eventually(async () => {
      const res = await call('/audit?action=sandbox.exec&limit=100', admin);
      const { entries } = (await res.json()) as { entries: Array<{ actor: string; resource: Record<string, unknown> }> };
      return entries.find((candidate) => candidate.resource.sandbox_id === box.id);
    });
    expect(entry).toMatchObject({ actor: 'acme:alice', resource: { sandbox_id: box.id, command: 'echo the-output-itself; exit 3', exit_code: 3, timed_out: false, duration_ms: expect.any(Number) } });
    expect(JSON.stringify(entry)).not.toContain('the-output-itself\\n');
    await call(`/computers/sessions/${box.id}`, alice, { method: 'DELETE' });
  });

  it('a forget removes the subject\'s sandboxes; a tenant erase removes every sandbox before its rows', async () => {
    const carol = await t.mint({ sub: 'acme:carol', scope: 'acme:carol' });
    const hers = await create(carol);
    const admin = await t.mint({ sub: 'acme:boss', scope: 'acme', roles: ['admin'] });
    const forgot = await post('/audit/forget', admin, { subject: 'acme:carol' });
    expect(forgot.status, await forgot.clone().text()).toBe(200);
    expect(await rt.runtime.database.db.selectFrom('sandboxes').select('id').where('id', '=', hers.id).executeTakeFirst()).toBeUndefined();
    const host = rt.runtime.computers.host!;
    expect(await host.state(hers.id)).toBe('absent');

    const other = await configuredTenant(rt, { ceiling });
    const theirs = await create(await other.mint({ sub: 'acme:dan', scope: 'acme:dan' }));
    expect(await host.state(theirs.id)).toBe('running');
    const erased = await rt.admin(`/tenants/${other.tenantId}`, { method: 'DELETE' });
    expect(erased.status).toBe(200);
    expect(await erased.json()).toMatchObject({ steps: expect.arrayContaining([expect.objectContaining({ step: 'sandboxes', outcome: 'done', items: 1 })]) });
    expect(await host.state(theirs.id)).toBe('absent');
  });
});
