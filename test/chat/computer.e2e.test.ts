// The agent's computer through real turns (docs/decisions/0079): with `computer` held and not declined, the model is
// offered run_command, read_file and write_file; its first call makes the conversation's sandbox, the turn's end
// pauses it, the next turn wakes it with its files; the frames show the command and its exit code; output reaches
// the model cut; a person finds the sandbox at /computers/sessions and downloads what the agent made.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatWorld, MODEL, type ChatWorld } from './fixture.js';
import { eventually } from '../harness/eventually.js';

describe('the agent\'s computer', () => {
  let world: ChatWorld;

  beforeAll(async () => {
    world = await chatWorld({ COMPUTER_HOST: 'local' });
    const ceiling = world.tenant.configuration.ceiling;
    const pushed = await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'computer', 'triggers'] } });
    if (pushed.status !== 200) throw new Error(`widening the ceiling answered ${pushed.status}`);
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
  });

  const lastToolMessage = () => (world.fake.chatRequests().at(-1)!.messages.filter((m) => m.role === 'tool').at(-1) as { content: string }).content;
  const toolsOffered = () => ((world.fake.chatRequests().at(-1)?.tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name);

  it('runs a command in the conversation\'s sandbox, pauses it at the turn\'s end, and wakes it with its files next turn', async () => {
    const token = await world.token({ capabilities: ['chat', 'computer'], sub: 'acme:alice', scope: 'acme:alice' });
    world.fake.script(
      { toolCalls: [{ id: 'c1', name: 'write_file', arguments: JSON.stringify({ path: 'calc.py', content: 'print(6 * 7)\n' }) }] },
      { toolCalls: [{ id: 'c2', name: 'run_command', arguments: JSON.stringify({ command: 'python3 calc.py > answer.txt; cat answer.txt; exit 3' }) }] },
      'The answer is 42.',
    );
    const { response, events } = await world.streamAll(token, { message: 'compute 6*7', model: MODEL });
    expect(response.status).toBe(200);
    expect(toolsOffered()).toEqual(expect.arrayContaining(['run_command', 'read_file', 'write_file']));
    const starts = events.filter((event) => event.event === 'tool_start').map((event) => event.data as { name: string; arguments: Record<string, unknown> });
    const ends = events.filter((event) => event.event === 'tool_end').map((event) => event.data as { name: string; ok: boolean; result: string });
    expect(starts.map((start) => start.name)).toEqual(['write_file', 'run_command']);
    expect(starts[1]!.arguments.command).toBe('python3 calc.py > answer.txt; cat answer.txt; exit 3');
    expect(ends[1]).toMatchObject({ name: 'run_command', ok: true, result: expect.stringContaining('exit code 3') });
    expect(lastToolMessage()).toBe('exit code 3\nstdout:\n42\n');
    const sessionId = (events.at(-1)!.data as { session_id: string }).session_id;

    // The person sees the agent's sandbox, paused now the turn is over, and downloads what it made.
    const listed = (await (await world.rt.endUser('/computers/sessions', token)).json()) as { sandboxes: Array<{ id: string; session_id: string; state: string }> };
    const box = listed.sandboxes.find((sandbox) => sandbox.session_id === sessionId)!;
    expect(box).toBeDefined();
    await eventually(async () => ((await (await world.rt.endUser(`/computers/sessions/${box.id}`, token)).json()) as { state: string }).state === 'paused');
    expect(await (await world.rt.endUser(`/computers/sessions/${box.id}/files?path=answer.txt`, token)).text()).toBe('42\n');

    // The next turn in the conversation wakes the same sandbox: its files are there.
    world.fake.script({ toolCalls: [{ id: 'c3', name: 'read_file', arguments: JSON.stringify({ path: '/workspace/answer.txt' }) }] }, 'Still 42.');
    const next = await world.chat(token, { message: 'read it back', session_id: sessionId, model: MODEL });
    expect(next.status).toBe(200);
    expect(lastToolMessage()).toBe('42\n');
    const again = (await (await world.rt.endUser('/computers/sessions', token)).json()) as { sandboxes: Array<{ id: string }> };
    expect(again.sandboxes.map((sandbox) => sandbox.id)).toEqual([box.id]);
  });

  it('serves an unattended run: a trigger\'s turn runs a command in its conversation\'s sandbox, audited as unattended', async () => {
    const token = await world.token({ capabilities: ['chat', 'computer', 'triggers'], sub: 'acme:dora', scope: 'acme:dora' });
    const made = await world.rt.endUser('/triggers', token, { method: 'POST', body: JSON.stringify({ name: 'build', prompt: 'Build what the event names.' }) });
    expect(made.status, await made.clone().text()).toBe(201);
    const trigger = (await made.json()) as { url: string };
    world.fake.script({ toolCalls: [{ id: 'c1', name: 'run_command', arguments: JSON.stringify({ command: 'echo built > artifact.txt; echo done' }) }] }, 'Built.');
    const fired = await fetch(trigger.url.replace(/^https?:\/\/[^/]+/, world.rt.url), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"target":"x"}' });
    expect(fired.status).toBe(200);
    const box = await eventually(async () => {
      const listed = (await (await world.rt.endUser('/computers/sessions', token)).json()) as { sandboxes: Array<{ id: string; session_id: string | null; state: string; exec_count: number }> };
      return listed.sandboxes.find((sandbox) => sandbox.session_id !== null && sandbox.exec_count === 1 && sandbox.state === 'paused');
    });
    expect(await (await world.rt.endUser(`/computers/sessions/${box.id}/files?path=artifact.txt`, token)).text()).toBe('built\n');
    expect(lastToolMessage()).toBe('exit code 0\nstdout:\ndone\n');
    // Audit entries are written in batches, a moment after.
    const audit = await eventually(async () => {
      const rows = await world.rt.runtime.database.db.selectFrom('audit_log').select(['actor', 'actor_kind']).where('action', '=', 'sandbox.exec').where('actor', '=', 'acme:dora').execute();
      return rows.length > 0 ? rows : undefined;
    });
    expect(audit).toEqual([{ actor: 'acme:dora', actor_kind: 'unattended' }]);
  });

  it('cuts a long output before the model sees it, and says so', async () => {
    const token = await world.token({ capabilities: ['chat', 'computer'], sub: 'acme:bob', scope: 'acme:bob' });
    world.fake.script({ toolCalls: [{ id: 'c1', name: 'run_command', arguments: JSON.stringify({ command: 'seq 1 100000' }) }] }, 'Long.');
    expect((await world.chat(token, { message: 'count', model: MODEL })).status).toBe(200);
    const seen = lastToolMessage();
    expect(seen.length).toBeLessThan(9_000);
    expect(seen).toMatch(/\[cut: \d+ more characters\]$/);
  });

  it('is not offered without `computer`, nor when the request declines it; a call anyway is refused', async () => {
    const without = await world.token({ capabilities: ['chat'], sub: 'acme:carol', scope: 'acme:carol' });
    world.fake.script({ toolCalls: [{ id: 'c1', name: 'run_command', arguments: JSON.stringify({ command: 'id' }) }] }, 'Could not.');
    expect((await world.chat(without, { message: 'run id', model: MODEL })).status).toBe(200);
    expect(toolsOffered()).not.toContain('run_command');
    expect(lastToolMessage()).toContain('not available');
    const holder = await world.token({ capabilities: ['chat', 'computer'], sub: 'acme:carol', scope: 'acme:carol' });
    world.fake.script('Declined.');
    expect((await world.chat(holder, { message: 'hi', model: MODEL, enable_computer: false })).status).toBe(200);
    expect(toolsOffered()).not.toContain('run_command');
    const sandboxes = (await (await world.rt.endUser('/computers/sessions', holder)).json()) as { sandboxes: unknown[] };
    expect(sandboxes.sandboxes).toEqual([]);
    const capabilities = (await (await world.rt.endUser('/capabilities', holder)).json()) as { switches: Record<string, boolean> };
    expect(capabilities.switches.enable_computer).toBe(true);
  });
});
