// The tools offered to one turn, computed once (DESIGN.md "Runs"): the built-in human-in-the-loop tools whose
// capability survives ceiling ∩ token ∩ flag, and the client tools the request declares, each passed through the
// same permission check. A call to anything outside this set is refused, never run.
import { invalidArgument } from '@agentplane/lib/errors';
import type { Capability, EffectivePermission } from '@agentplane/lib/permissions';
import type { ModelImage, ModelTool } from '../models/port.js';
import type { CitationStyle, Source } from './citations.js';
import type { ChatRequestInput } from './schemas.js';
import type { DeliveryRecord } from './turn-records.js';
import type { PendingHandoff } from '../store/schema.js';

export type ToolKind = 'client' | 'ask_user' | 'request_approval' | 'server';

/** What a request narrows of the tools (its skills, its allow-list), as families read it. */
export interface RequestNarrowing {
  plugins?: string[] | undefined;
  allowed_tools?: string[] | undefined;
}

/** Every tool family's tools for one turn, in registration order, and the families' end-of-turn work (chat/tool-registry.ts). */
export interface TurnTools {
  tools: ServerTool[];
  ended: Array<{ family: string; run: () => Promise<void> }>;
}

/** Where a call of a server tool is made: its conversation, run, call id and the turn's model. */
export interface ServerCallContext {
  sessionId: string;
  runId: string;
  toolCallId: string;
  model: string;
}

/**
 * What a server tool's call gives the model; `stop` ends the turn after it with that finish reason. `delivery` is the
 * record a webhook call leaves, written with the call's answer in one statement.
 */
export type ServerToolOutcome = (
  | { ok: true; sources: Source[]; style?: CitationStyle }
  /** `images`: pictures for the model beside the text (a screenshot), never stored or shown in frames. */
  | { ok: true; text: string; images?: ModelImage[] }
  /** The turn pauses: the page is the person's until their next POST /chat (`text` is what tool_end shows). */
  | { ok: true; text: string; handoff: Omit<PendingHandoff, 'tool_call_id'> }
  | { ok: false; message: string; stop?: 'subagents_incomplete' }
) & { delivery?: DeliveryRecord };

/** A call the person approved, made by the service when the turn goes on. */
export interface ClearedCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

/**
 * A tool this service runs itself, for the caller (the document search, memory, a webhook tool): offered only with
 * the capabilities it needs.
 */
export interface ServerTool {
  definition: ModelTool;
  needs: readonly Capability[];
  /** Each call waits for the person's approval first (a webhook tool published with `requiresApproval`). */
  requiresApproval?: boolean;
  /** Where it comes from, as `GET /tools` shows it; default `builtin`. */
  origin?: 'builtin' | 'webhook' | 'mcp' | 'skill';
  /** What the system prompt says of it when it is offered (the skills a turn may load). */
  guidance?: string;
  /** Passages to cite (`sources`), a plain answer for the model (`text`), or a refusal it can act on. */
  run(args: Record<string, unknown>, signal: AbortSignal, context: ServerCallContext): Promise<ServerToolOutcome>;
}

export interface OfferedTool {
  kind: ToolKind;
  definition: ModelTool;
  requiresApproval: boolean;
  server?: ServerTool;
}

export const ASK_USER: ModelTool = {
  name: 'ask_user',
  description:
    'Ask the person a question and wait for the answer. Use it when you cannot go on without information only they have. The turn pauses until they answer.',
  parameters: {
    type: 'object',
    properties: {
      question: { type: 'string', description: 'The question, as the person will read it' },
      options: { type: 'array', items: { type: 'string' }, description: 'Suggested answers, when there are a few obvious ones' },
    },
    required: ['question'],
  },
};

export const REQUEST_APPROVAL: ModelTool = {
  name: 'request_approval',
  description:
    'Ask the person to approve something before you do it, when it is irreversible or has consequences they should decide on. The turn pauses until they decide; if they refuse, stop that work and do not try another way.',
  parameters: {
    type: 'object',
    properties: {
      action: { type: 'string', description: 'One line: what you will do if approved' },
      detail: { type: 'string', description: 'The specifics the person is deciding on' },
    },
    required: ['action'],
  },
};

const BUILTIN_NAMES = new Set([ASK_USER.name, REQUEST_APPROVAL.name]);

export class ToolSet {
  private constructor(
    private readonly tools: Map<string, OfferedTool>,
    private readonly endings: TurnTools['ended'],
  ) {}

  /**
   * Refuses (400) client tools that collide with each other or with a built-in or server tool. `server` is what the
   * tool families offer this caller (ToolRegistry.forTurn), or a plain list of server tools.
   */
  static forTurn(permission: EffectivePermission, request: Pick<ChatRequestInput, 'tools'>, server: TurnTools | readonly ServerTool[] = []): ToolSet {
    const { tools: serverTools, ended } = 'tools' in server ? server : { tools: server, ended: [] };
    const tools = new Map<string, OfferedTool>();
    for (const server of serverTools) {
      // The service's own tools come first: a published tool cannot take a built-in's name (the control plane refuses
      // one, and a configuration that has one anyway leaves the built-in in place).
      if (tools.has(server.definition.name) || !permission.toolAllowed(server.definition.name, server.needs)) continue;
      tools.set(server.definition.name, { kind: 'server', definition: server.definition, requiresApproval: server.requiresApproval === true, server });
    }
    // A server tool this turn offers cannot be shadowed; one it does not offer (its capability not held) leaves the
    // name to the client, so a client's own `recall` keeps working for tokens without memory.
    const reserved = new Set([...BUILTIN_NAMES, ...tools.keys()]);
    if (permission.toolAllowed(ASK_USER.name)) tools.set(ASK_USER.name, { kind: 'ask_user', definition: ASK_USER, requiresApproval: false });
    if (permission.toolAllowed(REQUEST_APPROVAL.name)) {
      tools.set(REQUEST_APPROVAL.name, { kind: 'request_approval', definition: REQUEST_APPROVAL, requiresApproval: false });
    }
    const seen = new Set<string>();
    for (const tool of request.tools ?? []) {
      if (reserved.has(tool.name)) throw invalidArgument(`tool name '${tool.name}' is reserved for a built-in tool; rename the client tool`);
      if (seen.has(tool.name)) throw invalidArgument(`tool '${tool.name}' is declared twice`);
      seen.add(tool.name);
      if (!permission.toolAllowed(tool.name)) continue;
      tools.set(tool.name, {
        kind: 'client',
        definition: { name: tool.name, description: tool.description, parameters: tool.parameters as Record<string, unknown> },
        requiresApproval: tool.requiresApproval === true,
      });
    }
    return new ToolSet(tools, ended);
  }

  /** The families' end-of-turn work, once the turn's run ended; a failure is reported, never thrown. */
  async ended(onFailure: (family: string, error: unknown) => void): Promise<void> {
    await Promise.all(this.endings.map(({ family, run }) => run().catch((error: unknown) => onFailure(family, error))));
  }

  get(name: string): OfferedTool | undefined {
    return this.tools.get(name);
  }

  /** Every tool offered, in the order the model is given them. */
  list(): OfferedTool[] {
    return [...this.tools.values()];
  }

  definitions(): ModelTool[] {
    return [...this.tools.values()].map((tool) => tool.definition);
  }
}

/** The arguments the model wrote, as an object; undefined when they are not a JSON object. */
export function parseArguments(text: string): Record<string, unknown> | undefined {
  if (text.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** What the agent is told when the person refuses (SPEC.md Approval pause): stop, and no other route. */
export function refusalMessage(note: string | undefined): string {
  const base = 'The person did not approve this. Stop this work: do not do it, and do not try to achieve it another way. Tell them you stopped.';
  return note ? `${base} Their note: ${note}` : base;
}

/** A hand-off as callers see it (the done frame, turn.stopped, a frame): without the service's own bookkeeping. */
export function handoffView({ ended_by: _ended, ...handoff }: PendingHandoff): Omit<PendingHandoff, 'ended_by'> {
  return handoff;
}

/** What the agent is told when the person's next message ends a hand-off: the page is as they left it. */
export function handoffEndedMessage(handoff: PendingHandoff): string {
  const how =
    handoff.ended_by === 'check'
      ? 'The person has ended the hand-off of the page you handed over (a check of the page suggested the task is done: confirm it on the page yourself).'
      : 'The person has ended the hand-off of the page you handed over.';
  return `${how} The browser is as they left it: take a browser_snapshot to see the page now before you go on. Their message, if any, follows.`;
}

export function approvalMessage(note: string | undefined): string {
  return note ? `Approved. Their note: ${note}` : 'Approved.';
}

/** Refusal of a call outside the turn's tool set (SPEC.md Authentication 11). */
export const toolNotAvailable = (name: string) => `Tool '${name}' is not available in this conversation; do not call it again.`;
