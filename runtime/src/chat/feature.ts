// What chat brings to the composition root: failing an earlier life's runs at start (embedded store only), the
// sweep of runs whose process died, and its part of the tenant erase (running turns cancelled first, run logs
// after the rows, and the conversation tables).
import type { EventBus } from '@agentplane/lib/events/port';
import type { Logger } from '@agentplane/lib/logging';
import type { FeatureHost } from '../features.js';
import { tenantEventPrefix } from '../tenants/keys.js';
import type { TurnEngine } from './engine.js';
import { runLogKey, type RunStore } from './runs.js';

/** A tenant's conversation rows, children before parents (the foreign keys say so); usage rows are the tenant's too. */
const conversationTables = ['message_feedback', 'run_steers', 'usage_records', 'messages', 'runs', 'sessions'] as const;

export async function registerChat(
  host: FeatureHost,
  deps: {
    engine: TurnEngine;
    runs: RunStore;
    events: EventBus;
    logger: Logger;
    leaseSeconds: number;
    /** The store is this process's alone (the embedded database behind its data-dir lock). */
    storeIsExclusive: boolean;
  },
): Promise<void> {
  const { engine, events, logger } = deps;
  // On the embedded database a run still marked running was left by an earlier life, and is failed now rather than
  // when its lease lapses. Replicas sharing PostgreSQL leave it to the lease sweep, since the owner may be alive.
  if (deps.storeIsExclusive) {
    const recovered = await engine.recoverAbandoned();
    if (recovered > 0) logger.warn({ runs: recovered }, 'failed the runs an earlier start left running; their text is kept in their sessions');
  }
  // Cancel and steer notices for the runs this process holds arrive on its one channel. Not awaited: with Redis
  // away at start the service still starts (and says so on /ready), and until it listens each run reads both from
  // its row at every lease renewal.
  let stopListening: (() => Promise<void>) | undefined;
  engine.listen().then(
    (stop) => {
      stopListening = stop;
    },
    (error: unknown) => logger.warn({ err: error }, 'could not listen for run control notices; cancel and steer reach runs at their next lease renewal'),
  );
  host.onShutdown(async () => stopListening?.());
  // Any replica fails the runs of a process that died (their lease lapsed), so no turn looks alive forever.
  host.every('lost-run sweep', Math.max(500, (deps.leaseSeconds * 1000) / 2), () => engine.sweepLost());

  host.eraseStep({ name: 'run_logs', phase: 'outside_database', run: async (tenantId) => ({ items: await events.deleteByPrefix(tenantEventPrefix(tenantId)) }) });
  host.eraseStep({ name: 'runs', phase: 'stop_work', run: async (tenantId) => ({ items: await engine.cancelTenantRuns(tenantId) }) });
  // Forgetting a subject: their runs stopped (and waited for, so none writes into what is being removed), then their
  // conversations with everything in them; their votes on any message; usage rows stay (accounting, no subject).
  host.forgetStep({
    name: 'runs',
    run: async (tenantId, subject) => {
      const cancelled = await engine.cancelTenantRuns(tenantId, subject);
      const deadline = Date.now() + 10_000;
      while ((await engine.runsOf(tenantId, subject)) > 0) {
        if (Date.now() > deadline) throw new Error("a turn of the subject's was still running after 10 s");
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return { items: cancelled };
    },
  });
  // Their runs' logs go now, not when their retention lapses: `GET /chat/stream/{run_id}` would otherwise replay what
  // they typed for up to an hour. After the runs stopped, before the rows that name the runs go.
  host.forgetStep({
    name: 'run_logs',
    run: async (tenantId, subject) => ({ items: await events.deleteLogs((await deps.runs.allOf(tenantId, subject)).map((runId) => runLogKey(tenantId, runId))) }),
  });
  host.forgetRows({
    table: 'message_feedback',
    purge: async (trx, tenantId, subject) =>
      Number(
        (
          await trx
            .deleteFrom('message_feedback')
            .where('tenant_id', '=', tenantId)
            .where((eb) =>
              eb.or([
                eb('subject', '=', subject),
                eb('message_id', 'in', eb.selectFrom('messages').innerJoin('sessions', 'sessions.id', 'messages.session_id').select('messages.id').where('sessions.tenant_id', '=', tenantId).where('sessions.owner', '=', subject)),
              ]),
            )
            .executeTakeFirst()
        ).numDeletedRows,
      ),
  });
  const owned = (trx: Parameters<Parameters<FeatureHost['forgetRows']>[0]['purge']>[0], tenantId: string, subject: string) =>
    trx.selectFrom('sessions').select('id').where('tenant_id', '=', tenantId).where('owner', '=', subject);
  host.forgetRows({
    table: 'run_steers',
    purge: async (trx, tenantId, subject) =>
      Number((await trx.deleteFrom('run_steers').where('run_id', 'in', trx.selectFrom('runs').select('id').where('session_id', 'in', owned(trx, tenantId, subject))).executeTakeFirst()).numDeletedRows),
  });
  for (const table of ['messages', 'runs'] as const) {
    host.forgetRows({
      table,
      purge: async (trx, tenantId, subject) => Number((await trx.deleteFrom(table).where('session_id', 'in', owned(trx, tenantId, subject)).executeTakeFirst()).numDeletedRows),
    });
  }
  host.forgetRows({
    table: 'sessions',
    purge: async (trx, tenantId, subject) => Number((await trx.deleteFrom('sessions').where('tenant_id', '=', tenantId).where('owner', '=', subject).executeTakeFirst()).numDeletedRows),
  });
  for (const table of conversationTables) {
    host.eraseRows({
      table,
      purge: async (trx, tenantId) => Number((await trx.deleteFrom(table).where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
    });
  }
}
