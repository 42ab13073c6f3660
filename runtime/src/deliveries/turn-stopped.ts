// What `turn.stopped` says of an unattended run (docs/decisions/0059), whatever started it: how it went, its last
// answer, and, for a pause, what it waits for, so the receiver can send `approval_decisions` back (or, for a page
// handed over, show it to the person).
import { sql, type Kysely } from 'kysely';
import { handoffView } from '../chat/tools.js';
import type { RunOutcome } from '../chat/unattended.js';
import type { RuntimeSchema, SessionPending } from '../store/schema.js';

/** How much of the run's last answer the event carries. */
export const EVENT_CONTENT_CHARS = 20_000;

/** The event's data about the run; the caller adds `subject` and `origin`. Read on `db` (a transaction's). */
export async function stoppedRunData(db: Kysely<RuntimeSchema>, runId: string, outcome: RunOutcome): Promise<Record<string, unknown>> {
  const { rows } = await sql<{ session_id: string | null; pending: SessionPending | null; content: string | null }>`
    select r.session_id, s.pending,
      (select m.content from messages m where m.run_id = ${runId} and m.role = 'assistant' order by m.seq desc limit 1) as content
    from (select ${runId}::text as id) wanted
    left join runs r on r.id = wanted.id
    left join sessions s on s.id = r.session_id`.execute(db);
  const run = rows[0];
  const pending = run?.pending?.run_id === runId ? run.pending : null;
  return {
    run_id: runId,
    session_id: run?.session_id ?? null,
    status: outcome.status,
    finish_reason: outcome.finishReason ?? (outcome.status === 'failed' ? 'error' : null),
    error: outcome.error,
    content: (run?.content ?? '').slice(0, EVENT_CONTENT_CHARS),
    requires_action: pending !== null,
    approvals: pending?.approvals.map(({ kind: _kind, ...approval }) => approval) ?? [],
    questions: pending?.questions ?? [],
    // A page handed to the person: watched and used at /chat/sessions/{session_id}/browser/*, ended by a POST /chat.
    handoffs: pending?.handoffs?.map(handoffView) ?? [],
  };
}

/** The project's webhook URL from its pushed configuration, read on `db` so a transaction sees its own. */
export async function projectWebhookUrl(db: Kysely<RuntimeSchema>, tenantId: string): Promise<string | null> {
  const { rows } = await sql<{ url: string | null }>`select ${projectWebhookUrlOf(tenantId)} as url`.execute(db);
  return rows[0]?.url ?? null;
}

/** The project's webhook URL as an expression (null when none is set), for a statement that decides by it. */
export const projectWebhookUrlOf = (tenantId: string) =>
  sql<string | null>`(select document -> 'webhook' ->> 'url' from tenant_configurations where tenant_id = ${tenantId})`;

/** The project's webhook URL and a callback, the places an event goes. */
export async function eventTargets(db: Kysely<RuntimeSchema>, tenantId: string, callbackUrl: string | null): Promise<{ target: 'project' | 'callback'; url: string }[]> {
  const project = await projectWebhookUrl(db, tenantId);
  return [...(project ? [{ target: 'project' as const, url: project }] : []), ...(callbackUrl ? [{ target: 'callback' as const, url: callbackUrl }] : [])];
}
