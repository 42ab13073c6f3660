import { describe, expect, it } from 'vitest';
import { CATALOGUE } from './catalogue.js';
import { FEATURES, IMPLEMENTED_FLAGS, isImplemented, unimplementedWarnings } from './features.js';

describe('features of this build', () => {
  it('register only catalogue capabilities, each under one feature', () => {
    const names = new Set(CATALOGUE.map((row) => row.name));
    const registered = FEATURES.flatMap((feature) => feature.capabilities);
    for (const capability of registered) expect(names.has(capability)).toBe(true);
    expect(new Set(registered).size).toBe(registered.length);
  });

  it('back a switch only through a capability they serve, or by naming it', () => {
    expect(IMPLEMENTED_FLAGS).toEqual(['enable_approvals', 'enable_ask_user', 'enable_auto_title', 'enable_browser', 'enable_computer', 'enable_memory', 'enable_plugins', 'enable_rag', 'enable_scheduling', 'enable_subagents', 'enable_todo', 'enable_web_search', 'enable_webhook_tools']);
    for (const flag of ['enable_voice_control', 'enable_widgets']) {
      expect(IMPLEMENTED_FLAGS).not.toContain(flag);
    }
  });

  it('warn of each granted capability nothing serves, and of nothing else', () => {
    expect(isImplemented('chat')).toBe(true);
    expect(isImplemented('browser')).toBe(true);
    expect(isImplemented('voice')).toBe(false);
    expect(unimplementedWarnings(['browser', 'chat', 'computer', 'voice', 'web_search', 'browser_handoff', 'widgets'])).toEqual([
      "granted capability 'voice' has nothing behind it yet",
      "granted capability 'widgets' has nothing behind it yet",
    ]);
    expect(unimplementedWarnings(['chat', 'ask_user'])).toEqual([]);
  });
});
