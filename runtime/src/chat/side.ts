// Generations beside the turn (SPEC.md Chat): a conversation's title (auto_title), suggested follow-ups and a recap
// for the person. They read the conversation but never write to it (the title aside) and never reach the agent.
// Their model calls reserve against the project's limits and are recorded in usage like any other.
import type { Kysely } from 'kysely';
import { storableText } from '@agentplane/lib/http/text';
import type { Logger } from '@agentplane/lib/logging';
import { effectivePermission } from '@agentplane/lib/permissions';
import { claimsFromToken } from '@agentplane/lib/tokens/permission-claims';
import type { ModelFactory, ModelMessage, ProviderTarget } from '../models/port.js';
import type { Principal } from '../auth/authenticate.js';
import type { RuntimeSchema } from '../store/schema.js';
import type { TenantService } from '../tenants/service.js';
import { permissionDenied } from '@agentplane/lib/errors';
import type { Turn } from './turn/turn.js';
import { clampHistory, toModelMessages } from './history.js';
import type { PlannedCall, UsageLimiter, UsageLimits } from './limits.js';
import { chooseModel, limitsOf } from './model-choice.js';
import type { SessionService } from '../sessions/service.js';
import type { UsageRecorder } from './usage.js';

/** How much of the conversation a side generation reads: enough for its gist, cheap to send. */
const SIDE_CONTEXT_TOKENS = 4000;

export interface SideDeps {
  db: Kysely<RuntimeSchema>;
  models: ModelFactory;
  limiter: UsageLimiter;
  tenants: TenantService;
  usage: UsageRecorder;
  sessions: SessionService;
  logger: Logger;
}

export class SideGenerations {
  constructor(private readonly deps: SideDeps) {}

  /** What a route checks before it validates the body: the capability, then the conversation (404 unless visible). */
  async authorize(principal: Principal, sessionId: string, capability: 'followups' | 'recap'): Promise<void> {
    this.require(principal, capability);
    await this.deps.sessions.visibleSession(principal, sessionId);
  }

  async followups(principal: Principal, sessionId: string, count: number): Promise<{ followups: string[] }> {
    this.require(principal, 'followups');
    const session = await this.deps.sessions.visibleSession(principal, sessionId);
    const text = await this.generate(principal, session.id, session.model, 'followups', [
      `Suggest ${count} short messages the person might send next in this conversation, one per line, no numbering, no quotes, in the person's language.`,
    ]);
    const followups = text
      .split('\n')
      .map((line) => line.replace(/^\s*(?:[-*•]|\d+[.)])\s*/, '').trim())
      .filter((line) => line !== '')
      .slice(0, count);
    return { followups };
  }

  async recap(principal: Principal, sessionId: string): Promise<{ recap: string }> {
    this.require(principal, 'recap');
    const session = await this.deps.sessions.visibleSession(principal, sessionId);
    const text = await this.generate(principal, session.id, session.model, 'recap', [
      'Recap this conversation for the person in one line of at most 25 words, in their language. Answer with the line only.',
    ]);
    return { recap: text.split('\n').find((line) => line.trim() !== '')?.trim() ?? '' };
  }

  /** Titles a conversation that has none after its turn; best effort, nothing fails the turn. */
  titleAfterTurn(turn: Turn): void {
    void (async () => {
      const session = await this.deps.db.selectFrom('sessions').select(['title']).where('id', '=', turn.sessionId).executeTakeFirst();
      if (!session || session.title !== '') return;
      const messages: ModelMessage[] = [
        ...(await this.history(turn.sessionId)),
        { role: 'user', content: 'Give this conversation a title of at most 6 words, in its language. Answer with the title only, no quotes.' },
      ];
      const result = await this.call(turn.tenantId, turn.limits, turn.target, { model: turn.model, price: turn.price, messages });
      await this.deps.usage.record({ tenantId: turn.tenantId, sessionId: turn.sessionId, runId: turn.runId, model: turn.model, price: turn.price, usage: result.usage, admission: result.admission, purpose: 'title' });
      const title = storableText(result.text.split('\n')[0]!.replace(/^["'\s]+|["'\s.]+$/g, '').slice(0, 200));
      if (title === '') return;
      // Only if still untitled: a title the caller set meanwhile stands.
      await this.deps.db.updateTable('sessions').set({ title }).where('id', '=', turn.sessionId).where('title', '=', '').execute();
    })().catch((error: unknown) => this.deps.logger.warn({ err: error, run_id: turn.runId }, 'auto title failed'));
  }

  private require(principal: Principal, capability: 'followups' | 'recap'): void {
    if (!principal.permission.has(capability)) {
      throw permissionDenied(`${capability} needs capability '${capability}', which this token does not hold`, { code: 'capability_denied' });
    }
  }

  /** One generation over the conversation's recent history; '' when the project has no model (it costs nothing). */
  private async generate(principal: Principal, sessionId: string, sessionModel: string | null, purpose: string, instructions: string[]): Promise<string> {
    const generated = await this.oneShot(principal, sessionId, sessionModel ?? undefined, purpose, async () => [
      ...(await this.history(sessionId)),
      { role: 'user', content: instructions.join('\n') },
    ]);
    return generated?.text ?? '';
  }

  /**
   * One model call for `purpose` on `model` (or the project's default), admitted against the project's caps and
   * recorded in usage under the conversation; undefined when the project has no model. The hand-off check uses it.
   */
  async oneShot(principal: Principal, sessionId: string, model: string | undefined, purpose: string, messages: () => Promise<ModelMessage[]>): Promise<{ text: string; model: string } | undefined> {
    const permission = effectivePermission({ ceiling: principal.configuration.document.ceiling, token: claimsFromToken(principal.claims) });
    const routing = await this.deps.tenants.routing(principal.tenantId);
    const choice = chooseModel(principal.configuration, permission, routing, model);
    if (choice.kind === 'none') return undefined;
    const result = await this.call(principal.tenantId, limitsOf(principal.configuration), choice.target, { model: choice.model, price: choice.price, messages: await messages() });
    await this.deps.usage.record({ tenantId: principal.tenantId, sessionId, runId: null, model: choice.model, price: choice.price, usage: result.usage, admission: result.admission, purpose });
    return { text: result.text, model: choice.model };
  }

  /** One call, admitted against the project's caps first; a call that fails releases its reservation. */
  private async call(tenantId: string, limits: UsageLimits | undefined, target: ProviderTarget, call: Pick<PlannedCall, 'model' | 'price' | 'messages'>) {
    const admission = await this.deps.limiter.admit(tenantId, limits, () => call);
    try {
      return { ...(await this.deps.models(target, call.model).generate({ model: call.model, messages: [...call.messages] })), admission };
    } catch (error) {
      await admission.settle(null);
      throw error;
    }
  }

  private async history(sessionId: string): Promise<ModelMessage[]> {
    const rows = await this.deps.db.selectFrom('messages').selectAll().where('session_id', '=', sessionId).orderBy('seq').execute();
    return clampHistory(null, toModelMessages(rows), SIDE_CONTEXT_TOKENS);
  }

}
