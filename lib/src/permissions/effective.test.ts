import { describe, expect, it } from 'vitest';
import { CAPABILITIES, type Capability } from './catalogue.js';
import { builtinToolCapabilities, effectivePermission } from './effective.js';
import { resolveRequestedCapabilities, type CapabilityCeiling } from './grant.js';

const ceiling: CapabilityCeiling = { capabilities: CAPABILITIES };
const caps = (...names: Capability[]) => names;

describe('effectivePermission: ceiling ∩ token ∩ flag', () => {
  it('holds only what both the ceiling and the token hold', () => {
    const permission = effectivePermission({
      ceiling: { capabilities: caps('chat', 'memory', 'web_search') },
      token: { capabilities: caps('chat', 'web_search', 'browser') },
    });
    expect([...permission.capabilities].sort()).toEqual(['chat', 'web_search']);
  });

  it('loses a capability at once when the project removes it from the ceiling', () => {
    const token = { capabilities: caps('chat', 'browser') };
    expect(effectivePermission({ ceiling: { capabilities: caps('chat') }, token }).has('browser')).toBe(false);
  });

  it('a flag set false declines; unset or true declines nothing and adds nothing', () => {
    const token = { capabilities: caps('chat', 'documents:read', 'documents:write', 'tasks:read', 'tasks:write') };
    const declined = effectivePermission({ ceiling, token, request: { enable_rag: false, enable_scheduling: false } });
    expect([...declined.capabilities]).toEqual(['chat']);
    const asked = effectivePermission({ ceiling, token, request: { enable_rag: true, enable_web_search: true } });
    expect(asked.has('documents:write')).toBe(true);
    expect(asked.has('web_search')).toBe(false);
    expect(asked.switches.enable_web_search).toBe(false);
  });

  it('a read-only project never yields documents:write, even on a token that carries it', () => {
    const permission = effectivePermission({
      ceiling: { capabilities: caps('documents:read', 'documents:write'), readOnly: true },
      token: { capabilities: caps('documents:read', 'documents:write') },
    });
    expect([...permission.capabilities]).toEqual(['documents:read']);
  });

  it('output_modalities declines image, audio and video kinds it does not list', () => {
    const token = { capabilities: caps('chat', 'output:file', 'output:image', 'output:audio') };
    const permission = effectivePermission({ ceiling, token, request: { output_modalities: ['text', 'image'] } });
    expect([...permission.capabilities].sort()).toEqual(['chat', 'output:file', 'output:image']);
    const prefixed = effectivePermission({ ceiling, token, request: { output_modalities: ['output:audio', 'video'] } });
    expect(prefixed.has('output:audio')).toBe(true);
    expect(prefixed.has('output:video')).toBe(false);
  });

  it('enable_voice_control false switches off the controls, not the call', () => {
    const permission = effectivePermission({
      ceiling,
      token: { capabilities: caps('voice') },
      request: { enable_voice_control: false },
    });
    expect(permission.has('voice')).toBe(true);
    expect(permission.switches.enable_voice_control).toBe(false);
  });

  it('switches say which enable_* flags are worth setting for what the token holds', () => {
    const { switches } = effectivePermission({ ceiling, token: { capabilities: caps('chat', 'tasks:read', 'voice') } });
    expect(Object.entries(switches).filter(([, on]) => on).map(([flag]) => flag).sort()).toEqual([
      'enable_plugins',
      'enable_scheduling',
      'enable_voice_control',
    ]);
  });

  it('clamps the tool-iteration and context ceilings against the project’s', () => {
    const permission = effectivePermission({
      ceiling: { capabilities: caps('chat'), maxToolIterations: 8, maxContextTokens: 10_000 },
      token: { capabilities: caps('chat'), maxToolIterations: 20, maxContextTokens: 4000, maxEffort: 'low' },
    });
    expect(permission).toMatchObject({ maxToolIterations: 8, maxContextTokens: 4000, maxEffort: 'low' });
  });

  it('models: unset allow-list allows any; a list allows only its members', () => {
    expect(effectivePermission({ ceiling, token: { capabilities: [] } }).modelAllowed('gpt-x')).toBe(true);
    const listed = effectivePermission({ ceiling, token: { capabilities: [], allowedModels: ['a'] } });
    expect([listed.modelAllowed('a'), listed.modelAllowed('b')]).toEqual([true, false]);
    expect(effectivePermission({ ceiling, token: { capabilities: [], allowedModels: [] } }).modelAllowed('a')).toBe(false);
  });
});

describe('tools (SPEC.md Authentication 11-13)', () => {
  it('knows what the network tools and human-in-the-loop tools need', () => {
    expect(builtinToolCapabilities('web_search')).toEqual(['web_search']);
    expect(builtinToolCapabilities('browse_url')).toEqual(['web_search']);
    expect(builtinToolCapabilities('screenshot_url')).toEqual(['web_search']);
    expect(builtinToolCapabilities('browser_click')).toEqual(['browser']);
    expect(builtinToolCapabilities('browser_handoff')).toEqual(['browser', 'browser_handoff']);
    expect(builtinToolCapabilities('ask_user')).toEqual(['ask_user']);
    expect(builtinToolCapabilities('request_approval')).toEqual(['approvals']);
    expect(builtinToolCapabilities('lookup_order')).toEqual([]);
    expect(builtinToolCapabilities('constructor')).toEqual([]);
  });

  it('read-only example: chat + documents:read inherits output modalities but cannot reach the network', () => {
    const project: CapabilityCeiling = { capabilities: CAPABILITIES };
    const { granted } = resolveRequestedCapabilities(['chat', 'documents:read'], project);
    expect(granted.filter((c) => c.startsWith('output:'))).toEqual([
      'output:audio', 'output:file', 'output:image', 'output:video',
    ]);
    const permission = effectivePermission({ ceiling: project, token: { capabilities: granted } });
    for (const tool of ['web_search', 'browse_url', 'browser_navigate', 'browser_click', 'screenshot_url']) {
      expect(permission.toolAllowed(tool), tool).toBe(false);
    }
    expect(permission.has('output:image')).toBe(true);
    expect(permission.toolAllowed('search_documents', 'documents:read')).toBe(true);
    expect(permission.toolAllowed('upload_document', 'documents:write')).toBe(false);
  });

  it('a tool the model calls anyway is refused without its capability, whatever the caller says it needs', () => {
    const permission = effectivePermission({ ceiling, token: { capabilities: caps('chat', 'webhook_tools') } });
    expect(permission.toolAllowed('web_search', null)).toBe(false);
    expect(permission.toolAllowed('browse_url', 'webhook_tools')).toBe(false);
    expect(permission.toolAllowed('ask_user')).toBe(false);
    expect(permission.toolAllowed('request_approval')).toBe(false);
    expect(permission.toolAllowed('crm_lookup', 'webhook_tools')).toBe(true);
  });

  it('declining a flag removes the tools behind it', () => {
    const token = { capabilities: caps('web_search', 'browser', 'ask_user', 'approvals') };
    const all = effectivePermission({ ceiling, token });
    expect(['web_search', 'browser_type', 'ask_user', 'request_approval'].every((t) => all.toolAllowed(t))).toBe(true);
    const declined = effectivePermission({
      ceiling,
      token,
      request: { enable_web_search: false, enable_browser: false, enable_ask_user: false, enable_approvals: false },
    });
    expect(['web_search', 'browser_type', 'ask_user', 'request_approval'].some((t) => declined.toolAllowed(t))).toBe(false);
  });

  it('allowed_tools narrows by name, on the request and on the token, and never grants a capability', () => {
    const token = {
      capabilities: caps('web_search', 'webhook_tools'),
      allowedTools: ['web_search', 'crm_lookup', 'browse_url'],
    };
    const request = { allowed_tools: ['crm_lookup', 'browser_click', 'web_search', 'notes'] };
    const permission = effectivePermission({ ceiling, token, request });
    expect(permission.toolAllowed('crm_lookup', 'webhook_tools')).toBe(true);
    expect(permission.toolAllowed('web_search')).toBe(true);
    expect(permission.toolAllowed('browse_url')).toBe(false); // not on the request's list
    expect(permission.toolAllowed('notes')).toBe(false); // not on the token's list
    expect(permission.toolAllowed('browser_click')).toBe(false); // listed, but no browser capability
  });

  it('skills need no capability; enable_plugins false or the plugins list declines them', () => {
    const token = { capabilities: caps('chat') };
    expect(effectivePermission({ ceiling, token }).skillAllowed('faq')).toBe(true);
    expect(effectivePermission({ ceiling, token, request: { enable_plugins: false } }).skillAllowed('faq')).toBe(false);
    const listed = effectivePermission({ ceiling, token, request: { plugins: ['faq'] } });
    expect([listed.skillAllowed('faq'), listed.skillAllowed('other')]).toEqual([true, false]);
  });
});
