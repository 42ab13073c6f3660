// What `GET /capabilities` says of `screenshot_url`: offered where this runtime has a browser (the runtime's own
// tests run with Chromium, end-user-auth.http.test.ts), and where it has none, not offered and why.
import { describe, expect, it } from 'vitest';
import { effectivePermission, type Capability } from '@agentplane/lib/permissions';
import type { Principal } from './authenticate.js';
import { capabilitiesOf } from './capabilities.js';

const capabilities: Capability[] = ['chat', 'web_search', 'input:image'];
const principal = {
  tenantId: '00000000-0000-4000-8000-000000000001',
  claims: { sub: 'acme:alice', scope: 'acme', roles: [] },
  permission: effectivePermission({ ceiling: { capabilities }, token: { capabilities } }),
  configuration: { document: { ceiling: { registeredModels: [] } } },
} as unknown as Principal;

describe('tools not offered', () => {
  it('names screenshot_url and why where the runtime has no browser', () => {
    expect(capabilitiesOf(principal, { sandboxHost: false, browser: false }).tools_not_offered).toEqual([
      { tool: 'screenshot_url', capability: 'web_search', reason: 'it pictures the page in a browser, and this runtime has none (no Chromium here and no browser server, BROWSER_HOST)' },
    ]);
  });

  it('names nothing where it has one', () => {
    expect(capabilitiesOf(principal, { sandboxHost: false, browser: true }).tools_not_offered).toEqual([]);
  });
});
