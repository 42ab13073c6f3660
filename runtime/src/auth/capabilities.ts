// `GET /capabilities`: what the caller's token holds under the project's current ceiling, and which `enable_*`
// switches would do anything, so a client shows only the features that work: a switch appears once a feature of
// this build is behind it (lib/src/permissions/features.ts). The arithmetic is lib's.
import { z } from 'zod';
import {
  CAPABILITIES,
  EFFORTS,
  IMPLEMENTED_FLAGS,
  intersectAllowList,
  isPrivileged,
  type Capability,
  type RequestFlag,
} from '@agentplane/lib/permissions';
import type { Principal } from './authenticate.js';

const switchesShape = Object.fromEntries(IMPLEMENTED_FLAGS.map((flag) => [flag, z.boolean()])) as Partial<Record<RequestFlag, z.ZodBoolean>>;

export const Capabilities = z
  .object({
    tenant_id: z.uuid(),
    subject: z.string().meta({ description: 'The token\'s identity path' }),
    scope: z.string().meta({ description: 'The visibility prefix: the token sees the subtree under it' }),
    capabilities: z
      .array(z.enum(CAPABILITIES as [Capability, ...Capability[]]))
      .meta({ description: 'Effective now: the token\'s capabilities within the project\'s current ceiling, sorted. A capability the project has since removed is not listed' }),
    switches: z
      .strictObject(switchesShape)
      .meta({
        description:
          'Per `enable_*` flag of ChatRequest that a feature of this build is behind: true when the token holds what the flag switches and the project has it (a webhook tool published, for `enable_webhook_tools`), so setting it (or leaving it unset) does something. A flag with nothing behind it yet is not listed',
      }),
    allowed_models: z
      .array(z.string())
      .nullable()
      .meta({ description: 'Models this token may name: its allow-list within the project\'s registered models. null: any model the project registers' }),
    max_effort: z.enum(EFFORTS).nullable().meta({ description: 'null: no effort ceiling' }),
    max_tool_iterations: z.int().nullable().meta({ description: 'The tighter of the token\'s and the project\'s; null: unlimited' }),
    max_context_tokens: z.int().nullable().meta({ description: 'The tighter of the token\'s and the project\'s; null: unlimited' }),
    privileged: z.boolean().meta({ description: 'The token carries role `admin`, `owner` or `service`' }),
    tools_not_offered: z
      .array(z.object({ tool: z.string(), capability: z.string(), reason: z.string() }))
      .meta({ description: 'Tools a capability names that this build does not offer yet, and why' }),
  })
  .meta({ id: 'Capabilities' });

export type CapabilitiesOutput = z.infer<typeof Capabilities>;

/**
 * Whether the project has what a switch turns on: held webhook tools do nothing until the project publishes one.
 * Skills and MCP servers are per person as well as per project, so their switches are not judged here.
 */
function configured(flag: RequestFlag, document: Principal['configuration']['document'], runtime: RuntimeOffers): boolean {
  if (flag === 'enable_webhook_tools') return (document.webhook_tools?.length ?? 0) > 0;
  // A computer needs a sandbox host on this runtime, and a project that allows it at least one sandbox.
  if (flag === 'enable_computer') return runtime.sandboxHost && (document.computer?.max_sandboxes ?? 1) > 0;
  if (flag === 'enable_browser') return runtime.browser;
  return true;
}

/** What this runtime has that a switch depends on. */
export interface RuntimeOffers {
  sandboxHost: boolean;
  /** A browser the agent can drive (Chromium on this machine). */
  browser: boolean;
}

/**
 * SPEC.md: `screenshot_url` pictures a page in the browser (docs/decisions/0091); a runtime without one does not offer
 * it, and this says so. Where it is offered it still needs `input:image`, which the tools' listing reflects.
 */
function toolsNotOffered(runtime: RuntimeOffers): CapabilitiesOutput['tools_not_offered'] {
  if (runtime.browser) return [];
  return [{ tool: 'screenshot_url', capability: 'web_search', reason: 'it pictures the page in a browser, and this runtime has none (no Chromium here and no browser server, BROWSER_HOST)' }];
}

export function capabilitiesOf({ tenantId, claims, permission, configuration }: Principal, runtime: RuntimeOffers = { sandboxHost: false, browser: false }): CapabilitiesOutput {
  return {
    tenant_id: tenantId,
    subject: claims.sub,
    scope: claims.scope,
    capabilities: [...permission.capabilities].sort(),
    switches: Object.fromEntries(IMPLEMENTED_FLAGS.map((flag) => [flag, permission.switches[flag] && configured(flag, configuration.document, runtime)])),
    // A model the project has since unregistered is no longer usable, whatever the token lists.
    allowed_models: intersectAllowList(permission.allowedModels, configuration.document.ceiling.registeredModels) ?? null,
    max_effort: permission.maxEffort ?? null,
    max_tool_iterations: permission.maxToolIterations ?? null,
    max_context_tokens: permission.maxContextTokens ?? null,
    privileged: isPrivileged(claims.roles),
    tools_not_offered: toolsNotOffered(runtime),
  };
}
