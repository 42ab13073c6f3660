// A step's tool calls (SPEC.md Tools): refused when outside the turn's set or malformed, run here when the service
// runs them, or gathered into the pause that hands them to the client or the person; and the approved server calls
// a turn makes before its first step when it goes on after an approval pause.
import { storableText } from '@agentplane/lib/http/text';
import type { Logger } from '@agentplane/lib/logging';
import type { ModelImage, ModelToolCall } from '../../models/port.js';
import type { AuditEntry } from '../../governance/audit.js';
import type { NewMessage } from '../../sessions/conversations.js';
import type { PendingHandoff, SessionPending } from '../../store/schema.js';
import { citeSources } from '../citations.js';
import { historyMessage, type HistoryMessage } from '../history.js';
import { parseArguments, toolNotAvailable, type ClearedCall, type ServerTool, type ServerToolOutcome } from '../tools.js';
import type { DeliveryRecord } from '../turn-records.js';
import type { TurnWriter } from './persist.js';
import type { HeldRun, RunLog, Turn, TurnTotals } from './turn.js';

export class ToolCalls {
  constructor(
    private readonly logger: Logger,
    private readonly log: RunLog,
    private readonly writer: TurnWriter,
  ) {}

  /**
   * Tool calls of one step. Calls outside the turn's set, or with arguments that are not a JSON object, are answered
   * with a refusal the model can read (and the turn goes on); client calls, approvals and questions pause the turn.
   */
  async handleCalls(
    turn: Turn,
    calls: ModelToolCall[],
    signal: AbortSignal,
    totals: TurnTotals,
  ): Promise<{
    pending: SessionPending | null;
    answers: NewMessage[];
    /** The answers' pictures by call id, for the run's next prompts only: never stored. */
    images: Map<string, ModelImage[]>;
    deliveries: DeliveryRecord[];
    audit: AuditEntry[];
    stop?: 'subagents_incomplete';
  }> {
    const pending: SessionPending = { run_id: turn.runId, tool_calls: [], approvals: [], questions: [], handoffs: [] };
    const answers: NewMessage[] = [];
    const images = new Map<string, ModelImage[]>();
    const deliveries: DeliveryRecord[] = [];
    const audit: AuditEntry[] = [];
    let stop: 'subagents_incomplete' | undefined;
    const refuse = async (call: ModelToolCall, result: string, args: unknown) => {
      await this.log.frame(turn.tenantId, turn.runId, { type: 'tool_start', tool_call_id: call.id, name: call.name, arguments: args });
      await this.log.frame(turn.tenantId, turn.runId, { type: 'tool_end', tool_call_id: call.id, name: call.name, ok: false, result });
      answers.push({ role: 'tool', content: result, toolCallId: call.id, name: call.name, runId: turn.runId, subject: turn.subject });
    };
    for (const call of calls) {
      const tool = turn.tools.get(call.name);
      const args = parseArguments(call.arguments);
      if (!tool) {
        await refuse(call, toolNotAvailable(call.name), args ?? call.arguments);
        continue;
      }
      if (!args) {
        await refuse(call, `The arguments of '${call.name}' were not a JSON object; call it again with valid JSON arguments.`, call.arguments);
        continue;
      }
      if (tool.kind === 'server' && tool.server && !tool.requiresApproval) {
        const { stop: stopped, delivery, ok, handoff, images: pictures, ...answer } = await this.runServerCall(turn, tool.server, { id: call.id, name: call.name, arguments: args }, signal, totals);
        stop ??= stopped;
        if (pictures) images.set(call.id, pictures);
        // A hand-off's answer is the person's, given when the pause ends.
        if (handoff) pending.handoffs!.push({ tool_call_id: call.id, ...handoff });
        else answers.push(answer);
        if (delivery) deliveries.push(delivery);
        audit.push(toolCallEntry(turn, call.id, call.name, tool.server.origin ?? 'builtin', ok));
      } else if (tool.kind === 'ask_user') {
        const options = Array.isArray(args.options) ? args.options.filter((option): option is string => typeof option === 'string') : undefined;
        pending.questions.push({ tool_call_id: call.id, question: String(args.question ?? ''), ...(options && options.length > 0 ? { options } : {}) });
      } else if (tool.kind === 'request_approval') {
        pending.approvals.push({
          tool_call_id: call.id,
          action: oneLine(String(args.action ?? 'approve this step')),
          detail: typeof args.detail === 'string' ? args.detail : '',
          tool: null,
          arguments: args,
          kind: 'request_approval',
        });
      } else if (tool.requiresApproval) {
        pending.approvals.push({
          tool_call_id: call.id,
          action: oneLine(tool.definition.description) || `call ${call.name}`,
          detail: JSON.stringify(args),
          tool: call.name,
          arguments: args,
          kind: tool.kind === 'server' ? 'server' : 'client',
        });
      } else {
        pending.tool_calls.push({ id: call.id, name: call.name, arguments: args });
      }
    }
    const paused = pending.tool_calls.length + pending.approvals.length + pending.questions.length + pending.handoffs!.length > 0;
    if (pending.handoffs!.length === 0) delete pending.handoffs;
    return { pending: paused ? pending : null, answers, images, deliveries, audit, ...(stop ? { stop } : {}) };
  }

  /**
   * The approved server calls the turn starts with, made and their results stored. A tool this turn no longer
   * offers (its capability or the tool itself gone since the pause) is refused as any call outside the set is.
   */
  async makeCleared(turn: Turn, run: HeldRun, totals: TurnTotals): Promise<HistoryMessage[]> {
    const signal = run.controller.signal;
    const answers: NewMessage[] = [];
    const deliveries: DeliveryRecord[] = [];
    const audit: AuditEntry[] = [];
    for (const call of turn.cleared ?? []) {
      const tool = turn.tools.get(call.name);
      if (tool?.kind === 'server' && tool.server) {
        // A cleared call is a webhook tool's (approval gates no hand-off): one that asked for a pause is not paused again.
        const { stop: _stop, delivery, ok, handoff: _handoff, images: _images, ...answer } = await this.runServerCall(turn, tool.server, call, signal, totals);
        answers.push(answer);
        if (delivery) deliveries.push(delivery);
        audit.push(toolCallEntry(turn, call.id, call.name, tool.server.origin ?? 'builtin', ok));
        continue;
      }
      const result = toolNotAvailable(call.name);
      await this.log.frame(turn.tenantId, turn.runId, { type: 'tool_start', tool_call_id: call.id, name: call.name, arguments: call.arguments });
      await this.log.frame(turn.tenantId, turn.runId, { type: 'tool_end', tool_call_id: call.id, name: call.name, ok: false, result });
      answers.push({ role: 'tool', content: result, toolCallId: call.id, name: call.name, runId: turn.runId, subject: turn.subject });
    }
    this.writer.answers(turn, run, answers, deliveries, audit);
    return answers.map((answer) => historyMessage(answer));
  }

  /**
   * One call of a tool the service runs, between its tool_start and tool_end frames; a failure is the call's result
   * (the model reads it and the turn goes on).
   */
  private async runServerCall(
    turn: Turn,
    server: ServerTool,
    call: ClearedCall,
    signal: AbortSignal,
    totals: TurnTotals,
  ): Promise<NewMessage & { ok: boolean; stop?: 'subagents_incomplete'; delivery?: DeliveryRecord; handoff?: Omit<PendingHandoff, 'tool_call_id'>; images?: ModelImage[] }> {
    await this.log.frame(turn.tenantId, turn.runId, { type: 'tool_start', tool_call_id: call.id, name: call.name, arguments: call.arguments });
    const context = { sessionId: turn.sessionId, runId: turn.runId, toolCallId: call.id, model: turn.model };
    const outcome = await server.run(call.arguments, signal, context).catch((error: unknown): ServerToolOutcome => {
      if (signal.aborted) throw signal.reason;
      this.logger.warn({ err: error, run_id: turn.runId, tool: call.name }, 'server tool failed');
      return { ok: false, message: `${call.name} failed: ${error instanceof Error ? error.message : String(error)}` };
    });
    // A handler's or a page's text may hold what no store takes (NUL, a lone surrogate): kept, as U+FFFD.
    const result = storableText(!outcome.ok ? outcome.message : 'text' in outcome ? outcome.text : citeSources(totals.citations, outcome.sources, outcome.style));
    await this.log.frame(turn.tenantId, turn.runId, { type: 'tool_end', tool_call_id: call.id, name: call.name, ok: outcome.ok, result });
    const stop = !outcome.ok ? outcome.stop : undefined;
    return {
      role: 'tool',
      content: result,
      toolCallId: call.id,
      name: call.name,
      runId: turn.runId,
      subject: turn.subject,
      ok: outcome.ok,
      ...(stop ? { stop } : {}),
      ...(outcome.delivery ? { delivery: outcome.delivery } : {}),
      ...('handoff' in outcome ? { handoff: outcome.handoff } : {}),
      // A picture goes to the model only: the frames and the stored message have the text, which says what it shows.
      ...('images' in outcome && outcome.images && outcome.images.length > 0 ? { images: outcome.images } : {}),
    };
  }
}

/** The audit log's entry of a server tool's call: for whom, which tool, how it went. */
function toolCallEntry(turn: Turn, toolCallId: string, tool: string, origin: string, ok: boolean): AuditEntry {
  return {
    tenantId: turn.tenantId,
    actor: turn.subject,
    actorKind: 'end_user',
    action: 'tool_call',
    resource: { tool, origin, run_id: turn.runId, session_id: turn.sessionId, tool_call_id: toolCallId },
    outcome: ok ? 'ok' : 'failed',
  };
}

/** The first line of a text, trimmed to what fits on one line of a UI. */
function oneLine(text: string): string {
  const line = text.split('\n', 1)[0]!.trim();
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}
