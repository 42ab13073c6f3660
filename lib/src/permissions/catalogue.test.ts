import { describe, expect, it } from 'vitest';
import {
  CAPABILITIES,
  CAPABILITY_GROUPS,
  CATALOGUE,
  REQUEST_FLAGS,
  capabilityInfo,
  isCapability,
  isPrivileged,
  knownCapabilities,
  privilegedRoles,
} from './catalogue.js';

describe('the capability catalogue', () => {
  it("holds every capability of SPEC.md's table, once, in its group", () => {
    expect(CAPABILITIES).toHaveLength(37);
    expect(new Set(CAPABILITIES).size).toBe(CAPABILITIES.length);
    const groupOf = (group: string) => CATALOGUE.filter((info) => info.group === group).map((info) => info.name);
    expect(groupOf('Conversation')).toEqual(['chat', 'system_prompt', 'steer', 'voice']);
    expect(groupOf('Knowledge')).toEqual(['documents:read', 'documents:write', 'memory']);
    expect(groupOf('Internet')).toEqual(['web_search', 'browser', 'browser_handoff']);
    expect(groupOf('Agentic')).toEqual([
      'todo', 'decisions', 'computer', 'subagents', 'tasks:read', 'tasks:write', 'triggers',
    ]);
    expect(groupOf('Human in the loop')).toEqual([
      'ask_user', 'approvals', 'widgets', 'ui_tools', 'voice:transfer', 'followups', 'recap', 'auto_title',
    ]);
    expect(groupOf('Extensions')).toEqual(['webhook_tools', 'mcp:manage', 'plugins:write', 'action_space']);
    expect(groupOf('In and out')).toEqual([
      'input:file', 'input:image', 'input:audio', 'input:video',
      'output:file', 'output:image', 'output:audio', 'output:video',
    ]);
    expect(CATALOGUE.every((info) => CAPABILITY_GROUPS.includes(info.group) && info.grants.length > 0)).toBe(true);
  });

  it('pairs capabilities with their per-request flag, shared where the table shares one', () => {
    expect(capabilityInfo('documents:read').flag).toBe('enable_rag');
    expect(capabilityInfo('documents:write').flag).toBe('enable_rag');
    expect(capabilityInfo('tasks:read').flag).toBe('enable_scheduling');
    expect(capabilityInfo('tasks:write').flag).toBe('enable_scheduling');
    expect(capabilityInfo('output:image').flag).toBe('output_modalities');
    expect(capabilityInfo('output:file').flag).toBeNull();
    expect(capabilityInfo('input:image').flag).toBeNull();
    expect(capabilityInfo('chat').flag).toBeNull();
    expect(capabilityInfo('voice')).toMatchObject({ flag: 'enable_voice_control', flagScope: 'controls' });
  });

  it('lists the 17 ChatRequest flags, each backed by a capability', () => {
    expect(REQUEST_FLAGS).toHaveLength(17);
    for (const flag of REQUEST_FLAGS) expect(CATALOGUE.some((info) => info.flag === flag)).toBe(true);
  });

  it('knows its names and only its names', () => {
    expect(isCapability('web_search')).toBe(true);
    expect(isCapability('web-search')).toBe(false);
    expect(isCapability('toString')).toBe(false);
    expect(knownCapabilities(['chat', 'nope', 'chat', 'browser'])).toEqual(['browser', 'chat']);
  });
});

describe('privileged roles', () => {
  it('are admin, owner and service; other roles carry none', () => {
    expect(isPrivileged(['admin'])).toBe(true);
    expect(isPrivileged(['viewer', 'owner'])).toBe(true);
    expect(isPrivileged(['service'])).toBe(true);
    expect(isPrivileged(['Admin', 'administrator', 'root', 'support'])).toBe(false);
    expect(isPrivileged([])).toBe(false);
    expect(privilegedRoles(['service', 'viewer', 'admin', 'admin'])).toEqual(['admin', 'service']);
  });
});
