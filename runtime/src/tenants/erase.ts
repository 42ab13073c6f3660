// The ordered tenant erase (DESIGN.md flow 5), one procedure in both modes. Features register their part:
// work to stop (schedules, runs), sandboxes to delete, rows to purge, and things outside the database (vectors,
// stored bytes, run logs). Rows go in one transaction, all or nothing; everything else is best effort, reported.
import type { Kysely, Transaction } from 'kysely';
import type { Logger } from '../../../lib/src/logging.js';
import type { RuntimeSchema } from '../store/schema.js';

/** The phases, in the order they run. Rows are purged only after work is stopped and sandboxes are gone. */
export const erasePhases = ['stop_work', 'sandboxes', 'rows', 'outside_database'] as const;
export type ErasePhase = (typeof erasePhases)[number];

export interface EraseStepOutcome {
  step: string;
  phase: ErasePhase;
  outcome: 'done' | 'failed' | 'already_done';
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

/** A best-effort step outside the row purge. Must be idempotent: a repeated DELETE runs it again. */
export interface EraseStep {
  name: string;
  phase: Exclude<ErasePhase, 'rows'>;
  run(tenantId: string): Promise<{ items?: number }>;
}

/** Deletes one feature's rows of a tenant inside the erase transaction; returns the count removed. */
export interface RowPurge {
  table: string;
  purge(trx: Transaction<RuntimeSchema>, tenantId: string): Promise<number>;
}

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

  /** Purges run in reverse registration order, so the tenants row (registered first) goes last. */
  registerRows(purge: RowPurge): void {
    this.purges.push(purge);
  }

  /**
   * Runs the whole erase. `rowsPresent` false means an earlier erase already purged the rows: only the best-effort
   * steps run again. A failing row purge throws and leaves every row in place.
   */
  async erase(tenantId: string, rowsPresent: boolean): Promise<EraseReport> {
    const outcomes: EraseStepOutcome[] = [];
    const rowsDeleted: Record<string, number> = {};

    for (const phase of erasePhases) {
      if (phase === 'rows') {
        if (!rowsPresent) {
          outcomes.push({ step: 'rows', phase, outcome: 'already_done' });
          continue;
        }
        await this.db.transaction().execute(async (trx) => {
          for (const purge of [...this.purges].reverse()) {
            rowsDeleted[purge.table] = (rowsDeleted[purge.table] ?? 0) + (await purge.purge(trx, tenantId));
          }
          // The tombstone commits with the purge: a later DELETE knows the rows are gone and retries the rest.
          await trx
            .insertInto('tenant_erasures')
            .values({ tenant_id: tenantId, complete: false, report: JSON.stringify({}) })
            .onConflict((oc) => oc.column('tenant_id').doUpdateSet({ erased_at: new Date(), complete: false }))
            .execute();
        });
        outcomes.push({ step: 'rows', phase, outcome: 'done', items: Object.values(rowsDeleted).reduce((a, b) => a + b, 0) });
        continue;
      }
      for (const step of this.steps.filter((s) => s.phase === phase)) {
        try {
          const { items } = await step.run(tenantId);
          outcomes.push({ step: step.name, phase, outcome: 'done', ...(items === undefined ? {} : { items }) });
        } catch (error) {
          this.logger.warn({ err: error, tenant_id: tenantId, step: step.name }, 'tenant erase step failed');
          outcomes.push({ step: step.name, phase, outcome: 'failed', error: errorText(error) });
        }
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
    await this.db
      .updateTable('tenant_erasures')
      .set({ complete: report.complete, report: JSON.stringify(report) })
      .where('tenant_id', '=', tenantId)
      .execute();
    return report;
  }
}

function errorText(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 500);
}
