// The prompt a turn sends: stored messages in provider order (every call answered) and the context clamp, which
// keeps whole groups from the newest back.
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelMessage } from '../models/port.js';
import type { MessageRow } from '../sessions/conversations.js';
import { clampHistory, forgetOlderPictures, historyMessage, type HistoryMessage, IMAGE_TOKENS, loadTokensOf, MAX_PROMPT_IMAGES, toModelMessages, UNANSWERED_CALL } from './history.js';

let seq = 0;
function row(role: 'user' | 'assistant' | 'tool', content: string, extra: Partial<MessageRow> = {}): MessageRow {
  seq += 1;
  return {
    seq: String(seq),
    id: `m${seq}`,
    tenant_id: 't',
    session_id: 's',
    run_id: null,
    subject: 'alice',
    role,
    content,
    tool_calls: null,
    tool_call_id: null,
    name: null,
    model: null,
    metadata: null,
    created_at: new Date(),
    ...extra,
  };
}

const call = (id: string, name = 'lookup') => ({ id, name, arguments: '{}' });
let tokensOf: (message: ModelMessage) => number;
const tokensOfGroup = (group: ModelMessage[]) => group.reduce((sum, message) => sum + tokensOf(message), 0);
beforeAll(async () => {
  tokensOf = await loadTokensOf();
});

describe('toModelMessages', () => {
  it('places a tool result right after its call, wherever it was stored', () => {
    const groups = toModelMessages([
      row('user', 'weather?'),
      row('assistant', '', { tool_calls: [call('c1')] }),
      row('user', 'and hurry'),
      row('tool', 'sunny', { tool_call_id: 'c1' }),
    ]);
    expect(groups).toEqual([
      [{ role: 'user', content: 'weather?' }],
      [
        { role: 'assistant', content: '', toolCalls: [call('c1')] },
        { role: 'tool', toolCallId: 'c1', content: 'sunny' },
      ],
      [{ role: 'user', content: 'and hurry' }],
    ]);
  });

  it('answers a call with no stored result, and drops a result whose call is not stored', () => {
    const groups = toModelMessages([
      row('assistant', 'checking', { tool_calls: [call('c1'), call('c2')] }),
      row('tool', 'one', { tool_call_id: 'c1' }),
      row('tool', 'orphan', { tool_call_id: 'nobody' }),
    ]);
    expect(groups).toEqual([
      [
        { role: 'assistant', content: 'checking', toolCalls: [call('c1'), call('c2')] },
        { role: 'tool', toolCallId: 'c1', content: 'one' },
        { role: 'tool', toolCallId: 'c2', content: UNANSWERED_CALL },
      ],
    ]);
  });

  it("gives a tool result's pictures with it, the newest few only", () => {
    const picture = (n: number) => ({ mediaType: 'image/jpeg' as const, data: `picture-${n}` });
    const rows: HistoryMessage[] = [row('user', 'look')];
    for (let n = 1; n <= MAX_PROMPT_IMAGES + 2; n++) {
      rows.push(row('assistant', '', { tool_calls: [call(`c${n}`, 'browser_screenshot')] }));
      rows.push({ ...row('tool', `Screenshot ${n}`, { tool_call_id: `c${n}` }), images: [picture(n)] });
    }
    const results = toModelMessages(rows).flat().filter((message) => message.role === 'tool');
    expect(results.map((message) => message.content)).toEqual(['Screenshot 1', 'Screenshot 2', 'Screenshot 3', 'Screenshot 4', 'Screenshot 5', 'Screenshot 6']);
    expect(results.map((message) => message.images?.[0]?.data ?? null)).toEqual([null, null, 'picture-3', 'picture-4', 'picture-5', 'picture-6']);
  });

  it('lets go of the pictures no prompt can carry any more, keeping the newest few as sent', () => {
    const picture = (n: number) => ({ mediaType: 'image/jpeg' as const, data: `picture-${n}` });
    const rows: HistoryMessage[] = [row('user', 'look')];
    for (let n = 1; n <= MAX_PROMPT_IMAGES + 3; n++) {
      rows.push(row('assistant', '', { tool_calls: [call(`c${n}`, 'browser_screenshot')] }));
      rows.push({ ...row('tool', `Screenshot ${n}`, { tool_call_id: `c${n}` }), images: [picture(n)] });
    }
    const before = toModelMessages(rows);
    expect(before.flat().filter((message) => message.role === 'tool' && message.images).length).toBe(MAX_PROMPT_IMAGES);
    forgetOlderPictures(rows);
    expect(rows.filter((message) => message.images).map((message) => message.images![0]!.data)).toEqual(['picture-4', 'picture-5', 'picture-6', 'picture-7']);
    expect(toModelMessages(rows)).toEqual(before);
  });

  it('takes pictures from the run only: a stored message has none', () => {
    const answer = { role: 'tool' as const, content: 'Screenshot', toolCallId: 'c1' };
    expect(historyMessage(answer)).not.toHaveProperty('images');
    expect(historyMessage(answer, [])).not.toHaveProperty('images');
    expect(historyMessage(answer, [{ mediaType: 'image/jpeg', data: 'x' }]).images).toHaveLength(1);
  });

  it('an assistant message without calls carries no toolCalls', () => {
    expect(toModelMessages([row('assistant', 'hi', { tool_calls: [] })])).toEqual([[{ role: 'assistant', content: 'hi' }]]);
  });
});

describe('clampHistory', () => {
  const system: ModelMessage = { role: 'system', content: 'Be brief.' };
  const old: ModelMessage[] = [{ role: 'user', content: 'an old question '.repeat(40) }];
  const toolGroup: ModelMessage[] = [
    { role: 'assistant', content: 'let me look', toolCalls: [call('c1')] },
    { role: 'tool', toolCallId: 'c1', content: 'a long result '.repeat(30) },
  ];
  const newest: ModelMessage[] = [{ role: 'user', content: 'and now?' }];

  it('keeps everything, system first, when no ceiling is set', async () => {
    expect(await clampHistory(system, [old, toolGroup, newest], undefined)).toEqual([system, ...old, ...toolGroup, ...newest]);
    expect(await clampHistory(null, [old], undefined)).toEqual(old);
  });

  it('drops the oldest groups first and never splits a call from its result', async () => {
    const budget = tokensOf(system) + tokensOfGroup(toolGroup) + tokensOfGroup(newest);
    expect(await clampHistory(system, [old, toolGroup, newest], budget)).toEqual([system, ...toolGroup, ...newest]);
    // One token short of the tool group: the whole group goes, not just its result.
    expect(await clampHistory(system, [old, toolGroup, newest], budget - 1)).toEqual([system, ...newest]);
  });

  it('stops at the first group that does not fit, even if an older one would', async () => {
    const tiny: ModelMessage[] = [{ role: 'user', content: 'hi' }];
    const budget = tokensOf(system) + tokensOfGroup(newest) + tokensOfGroup(tiny);
    expect(await clampHistory(system, [tiny, toolGroup, newest], budget)).toEqual([system, ...newest]);
  });

  it('always keeps the newest group, even over the ceiling', async () => {
    expect(await clampHistory(system, [old, toolGroup], 1)).toEqual([system, ...toolGroup]);
  });

  it("counts a tool result's pictures", () => {
    const bare: ModelMessage = { role: 'tool', toolCallId: 'c', content: 'Screenshot' };
    expect(tokensOf({ ...bare, images: [{ mediaType: 'image/jpeg', data: 'x'.repeat(100_000) }] }) - tokensOf(bare)).toBe(IMAGE_TOKENS);
  });

  it('counts tool call names and arguments', () => {
    const bare: ModelMessage = { role: 'assistant', content: 'x' };
    expect(tokensOf({ ...bare, toolCalls: [{ id: 'c', name: 'lookup', arguments: '{"query":"a long query"}' }] })).toBeGreaterThan(tokensOf(bare));
  });
});
