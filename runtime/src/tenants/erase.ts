// The ordered tenant erase (DESIGN.md flow 5), one procedure in both modes. Features register their part:
// work to stop (schedules, runs), sandboxes to delete, rows to purge, and things outside the database (vectors,
// stored bytes, run logs). Rows go in one transaction, all or nothing, and only once work is stopped and
// sandboxes are gone; what lies outside the database is best effort, each outcome reported.
import type { Kysely, Transaction } from 'kysely';
import { AppError, errorMessage } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';
import type { RuntimeSchema } from '../store/schema.js';

/** The phases, in the order they run. */
export const erasePhases = ['stop_work', 'sandboxes', 'rows', 'outside_database'] as const;
export type ErasePhase = (typeof erasePhases)[number];

export interface EraseStepOutcome {
  step: string;
  phase: ErasePhase;
  outcome: 'done' | 'failed' | 'already_done' | 'not_run';
  /** How many things the step removed (rows, objects, logs), where it can tell. */
  items?: number;
  error?: string;
}

export interface EraseReport {
  tenant_id: string;
  /** The relational purge happened (now or by an earlier call). Always true in a successful answer. */
  erased: true;
  /** Every best-effort step succeeded; false means call DELETE again to retry the failed ones. */
  complete: boolean;
  rows_deleted: Record<string, number>;
  steps: EraseStepOutcome[];
  erased_at: string;
}

/**
 * A step outside the row purge. Must be idempotent, and must find what it removes without the tenant's rows
 * (by tenant id or key prefix, or by what it collected): a repeated DELETE runs it again after the rows are gone.
 */
export interface EraseStep {
  name: string;
  phase: Exclude<ErasePhase, 'rows'>;
  /**
   * Reads, inside the purge transaction and before any row goes, what the step will need once the rows are gone
   * (such as the indexes that hold the tenant's vectors, which only the tenant's rows name). Kept with the erase
   * record, as JSON, until the step succeeds; handed to every run after the purge, this erase's or a retry's.
   */
  collect?(trx: Transaction<RuntimeSchema>, tenantId: string): Promise<unknown>;
  run(tenantId: string, collected?: unknown): Promise<{ items?: number }>;
}

/** Deletes one feature's rows of a tenant inside the erase transaction; returns the count removed. */
export interface RowPurge {
  table: string;
  purge(trx: Transaction<RuntimeSchema>, tenantId: string): Promise<number>;
}

/** Phases that must succeed before any row goes: rows are how a retry would find what they missed. */
const gatingPhases: ErasePhase[] = ['stop_work', 'sandboxes'];

export class TenantEraser {
  private readonly steps: EraseStep[] = [];
  private readonly purges: RowPurge[] = [];

  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly logger: Logger,
  ) {}

  registerStep(step: EraseStep): void {
    this.steps.push(step);
  }

  /** Purges run in registration order; the `tenants` row itself always goes last, in the same transaction. */
  registerRows(purge: RowPurge): void {
    this.purges.push(purge);
  }

  /**
   * Runs the whole erase. `rowsPresent` false means an earlier erase already purged the rows: only the other
   * steps run again. A failing row purge throws and leaves every row in place; a failing step before the rows
   * stops the erase (500 `erase_incomplete`, report attached) with every row in place, so a retry can still find its work.
   */
  async erase(tenantId: string, rowsPresent: boolean): Promise<EraseReport> {
    const outcomes: EraseStepOutcome[] = [];
    const rowsDeleted: Record<string, number> = {};
    // What steps collected before the rows went: this erase's purge, or the one a retry follows.
    let collected: Record<string, unknown> = {};

    for (const phase of erasePhases) {
      if (phase === 'rows') {
        if (!rowsPresent) {
          outcomes.push({ step: 'rows', phase, outcome: 'already_done' });
          const record = await this.db.selectFrom('tenant_erasures').select('collected').where('tenant_id', '=', tenantId).executeTakeFirst();
          collected = record?.collected ?? {};
          continue;
        }
        collected = await this.purgeRows(tenantId, rowsDeleted);
        outcomes.push({ step: 'rows', phase, outcome: 'done', items: Object.values(rowsDeleted).reduce((a, b) => a + b, 0) });
        continue;
      }
      for (const step of this.steps.filter((s) => s.phase === phase)) outcomes.push(await this.runStep(tenantId, step, collected[step.name]));
      const failed = outcomes.find((o) => o.phase === phase && o.outcome === 'failed');
      if (rowsPresent && gatingPhases.includes(phase) && failed) {
        const rest = this.steps.filter((s) => erasePhases.indexOf(s.phase) > erasePhases.indexOf(phase));
        const report = {
          tenant_id: tenantId,
          erased: false,
          complete: false,
          rows_deleted: {},
          steps: [
            ...outcomes,
            { step: 'rows', phase: 'rows' as const, outcome: 'not_run' as const },
            ...rest.map((s) => ({ step: s.name, phase: s.phase, outcome: 'not_run' as const })),
          ],
        };
        throw new AppError('unavailable', `tenant erase stopped before purging rows: step '${failed.step}' failed (${failed.error}); nothing was purged, retry the DELETE`, {
          code: 'erase_incomplete',
          extra: { report },
        });
      }
    }

    const report: EraseReport = {
      tenant_id: tenantId,
      erased: true,
      complete: outcomes.every((o) => o.outcome !== 'failed'),
      rows_deleted: rowsDeleted,
      steps: outcomes,
      erased_at: new Date().toISOString(),
    };
    // A step that succeeded needs what it collected no more (it may name credentials): only a failed one's stays.
    const failed = new Set(outcomes.filter((o) => o.outcome === 'failed').map((o) => o.step));
    const kept = Object.fromEntries(Object.entries(collected).filter(([step]) => failed.has(step)));
    await this.db
      .updateTable('tenant_erasures')
      .set({ complete: report.complete, report: JSON.stringify(report), collected: JSON.stringify(kept) })
      .where('tenant_id', '=', tenantId)
      .execute();
    return report;
  }

  /** Purges the rows in one transaction, first collecting what later steps need of them; answers what was collected. */
  private async purgeRows(tenantId: string, rowsDeleted: Record<string, number>): Promise<Record<string, unknown>> {
    return this.db.transaction().execute(async (trx) => {
      const collected: Record<string, unknown> = {};
      for (const step of this.steps) if (step.collect) collected[step.name] = await step.collect(trx, tenantId);
      for (const purge of this.purges) {
        rowsDeleted[purge.table] = (rowsDeleted[purge.table] ?? 0) + (await purge.purge(trx, tenantId));
      }
      const tenant = await trx.deleteFrom('tenants').where('tenant_id', '=', tenantId).executeTakeFirst();
      rowsDeleted.tenants = Number(tenant.numDeletedRows);
      // The erase record commits with the purge: a later DELETE knows the rows are gone and retries the rest.
      await trx
        .insertInto('tenant_erasures')
        .values({ tenant_id: tenantId, complete: false, report: JSON.stringify({}), collected: JSON.stringify(collected) })
        .onConflict((oc) => oc.column('tenant_id').doUpdateSet({ erased_at: new Date(), complete: false, collected: JSON.stringify(collected) }))
        .execute();
      return collected;
    });
  }

  private async runStep(tenantId: string, step: EraseStep, collected: unknown): Promise<EraseStepOutcome> {
    try {
      const { items } = await step.run(tenantId, collected);
      return { step: step.name, phase: step.phase, outcome: 'done', ...(items === undefined ? {} : { items }) };
    } catch (error) {
      this.logger.warn({ err: error, tenant_id: tenantId, step: step.name }, 'tenant erase step failed');
      return { step: step.name, phase: step.phase, outcome: 'failed', error: errorMessage(error).slice(0, 500) };
    }
  }
}
