// The tools offered to a turn and the pure answers around tool calls.
import { describe, expect, it } from 'vitest';
import { AppError } from '@agentplane/lib/errors';
import { effectivePermission, type Capability } from '@agentplane/lib/permissions';
import { approvalMessage, parseArguments, refusalMessage, toolNotAvailable, ToolSet } from './tools.js';

const permission = (capabilities: string[], allowedTools?: string[]) =>
  effectivePermission({
    ceiling: { capabilities: ['chat', 'ask_user', 'approvals'] as Capability[] },
    token: { capabilities: capabilities as Capability[], ...(allowedTools ? { allowedTools } : {}) },
  });
const tool = (name: string, requiresApproval?: boolean) => ({ name, description: `${name} tool`, parameters: { type: 'object' }, ...(requiresApproval === undefined ? {} : { requiresApproval }) });

describe('ToolSet.forTurn', () => {
  it('offers the built-ins whose capability survives, and the declared client tools', () => {
    const set = ToolSet.forTurn(permission(['chat', 'ask_user']), { tools: [tool('search'), tool('pay', true)] });
    expect(set.definitions().map((definition) => definition.name)).toEqual(['ask_user', 'search', 'pay']);
    expect(set.get('request_approval')).toBeUndefined();
    expect(set.get('ask_user')).toMatchObject({ kind: 'ask_user' });
    expect(set.get('pay')).toMatchObject({ kind: 'client', requiresApproval: true });
    expect(set.get('search')).toMatchObject({ kind: 'client', requiresApproval: false });
  });

  it('leaves out client tools the token may not use', () => {
    const set = ToolSet.forTurn(permission(['chat', 'ask_user', 'approvals'], ['search']), { tools: [tool('search'), tool('pay')] });
    expect(set.get('search')).toBeDefined();
    expect(set.get('pay')).toBeUndefined();
  });

  it('refuses a client tool named like a built-in, and one declared twice (400)', () => {
    const kindOf = (tools: ReturnType<typeof tool>[]) => {
      try {
        ToolSet.forTurn(permission(['chat']), { tools });
        return 'accepted';
      } catch (error) {
        return error instanceof AppError ? error.kind : error;
      }
    };
    expect(kindOf([tool('ask_user')])).toBe('invalid_argument');
    expect(kindOf([tool('search'), tool('search')])).toBe('invalid_argument');
    // A reserved name is refused even when the built-in itself is not offered.
    expect(kindOf([tool('request_approval')])).toBe('invalid_argument');
  });
});

describe('parseArguments', () => {
  it('takes a JSON object, and blank text as no arguments', () => {
    expect(parseArguments('{"city":"Oslo"}')).toEqual({ city: 'Oslo' });
    expect(parseArguments('  ')).toEqual({});
  });

  it('answers undefined for anything else', () => {
    for (const text of ['[1]', 'null', '"x"', '{"cut": ', '42']) expect(parseArguments(text)).toBeUndefined();
  });
});

describe('answers the agent reads', () => {
  it('a refusal tells it to stop and carries the note', () => {
    expect(refusalMessage(undefined)).toMatch(/^The person did not approve this\. Stop this work/);
    expect(refusalMessage('too expensive')).toMatch(/Their note: too expensive$/);
  });

  it('an approval carries the note when there is one', () => {
    expect(approvalMessage(undefined)).toBe('Approved.');
    expect(approvalMessage('go')).toBe('Approved. Their note: go');
  });

  it('a call outside the set names the tool', () => {
    expect(toolNotAvailable('rm')).toContain("'rm'");
  });
});
