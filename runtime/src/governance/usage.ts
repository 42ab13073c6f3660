// What a tenant's project spent and how its turns went, over a window (SPEC.md control-plane `usage`, `observability`;
// docs/decisions/0063): from the usage rows every model call writes (decision 0018) and the runs' own rows. Read
// through the admin surface by the control plane, which also sums an organization's projects into its costs.
import { sql, type Kysely } from 'kysely';
import type { RuntimeSchema } from '../store/schema.js';

export const USAGE_WINDOWS = { '1h': 3_600, '24h': 86_400, '7d': 7 * 86_400, '30d': 30 * 86_400 } as const;
export type UsageWindow = keyof typeof USAGE_WINDOWS;

export interface UsageReport {
  window: UsageWindow;
  since: string;
  /** Turns started. */
  requests: number;
  /** Model calls made (turns' steps and side generations). */
  model_calls: number;
  input_tokens: number;
  output_tokens: number;
  /** Spend at the project's prices; null when no call in the window had a price. */
  cost_usd: number | null;
  /** Calls without a price (their cost is unknown, not zero). */
  unpriced_calls: number;
  by_model: { model: string; model_calls: number; input_tokens: number; output_tokens: number; cost_usd: number | null }[];
  by_purpose: { purpose: string; model_calls: number; cost_usd: number | null }[];
}

export interface ObservabilityReport {
  window: UsageWindow;
  since: string;
  requests: number;
  /** By how each ended (running ones included). */
  by_status: Record<string, number>;
  errors: number;
  error_rate: number | null;
  /** From a turn's start to its end, over turns that ended. */
  latency_ms: { p50: number | null; p95: number | null; p99: number | null; max: number | null };
  /** The most frequent error codes, most frequent first. */
  top_errors: { code: string; count: number }[];
}

export class UsageReports {
  constructor(private readonly db: Kysely<RuntimeSchema>) {}

  async usage(tenantId: string, window: UsageWindow): Promise<UsageReport> {
    const since = sinceOf(window);
    const byModel = await sql<{ model: string; model_calls: number; input_tokens: string; output_tokens: string; cost_usd: number | null; unpriced: number }>`
      select model, count(*)::int as model_calls, sum(input_tokens)::text as input_tokens, sum(output_tokens)::text as output_tokens,
        sum(cost_usd)::float8 as cost_usd, (count(*) filter (where cost_usd is null))::int as unpriced
      from usage_records where tenant_id = ${tenantId} and created_at >= ${since}
      group by model order by model`.execute(this.db);
    const byPurpose = await sql<{ purpose: string; model_calls: number; cost_usd: number | null }>`
      select purpose, count(*)::int as model_calls, sum(cost_usd)::float8 as cost_usd
      from usage_records where tenant_id = ${tenantId} and created_at >= ${since}
      group by purpose order by purpose`.execute(this.db);
    const runs = await sql<{ n: number }>`select count(*)::int as n from runs where tenant_id = ${tenantId} and created_at >= ${since}`.execute(this.db);
    const models = byModel.rows.map((row) => ({
      model: row.model,
      model_calls: row.model_calls,
      input_tokens: Number(row.input_tokens),
      output_tokens: Number(row.output_tokens),
      cost_usd: row.cost_usd,
    }));
    const priced = models.filter((row) => row.cost_usd !== null);
    return {
      window,
      since: since.toISOString(),
      requests: runs.rows[0]!.n,
      model_calls: models.reduce((sum, row) => sum + row.model_calls, 0),
      input_tokens: models.reduce((sum, row) => sum + row.input_tokens, 0),
      output_tokens: models.reduce((sum, row) => sum + row.output_tokens, 0),
      cost_usd: priced.length === 0 ? null : priced.reduce((sum, row) => sum + row.cost_usd!, 0),
      unpriced_calls: byModel.rows.reduce((sum, row) => sum + row.unpriced, 0),
      by_model: models,
      by_purpose: byPurpose.rows,
    };
  }

  async observability(tenantId: string, window: UsageWindow): Promise<ObservabilityReport> {
    const since = sinceOf(window);
    const statuses = await sql<{ status: string; n: number }>`
      select status, count(*)::int as n from runs where tenant_id = ${tenantId} and created_at >= ${since} group by status`.execute(this.db);
    const latency = await sql<{ p50: number | null; p95: number | null; p99: number | null; max: number | null }>`
      select percentile_cont(0.5) within group (order by ms) as p50, percentile_cont(0.95) within group (order by ms) as p95,
        percentile_cont(0.99) within group (order by ms) as p99, max(ms) as max
      from (select extract(epoch from (finished_at - created_at)) * 1000 as ms from runs
            where tenant_id = ${tenantId} and created_at >= ${since} and finished_at is not null) ended`.execute(this.db);
    const errors = await sql<{ code: string; count: number }>`
      select coalesce(error ->> 'code', 'unknown') as code, count(*)::int as count from runs
      where tenant_id = ${tenantId} and created_at >= ${since} and status = 'failed'
      group by 1 order by 2 desc, 1 limit 10`.execute(this.db);
    const byStatus = Object.fromEntries(statuses.rows.map((row) => [row.status, row.n]));
    const requests = statuses.rows.reduce((sum, row) => sum + row.n, 0);
    const failed = byStatus.failed ?? 0;
    const round = (value: number | null) => (value === null ? null : Math.round(Number(value)));
    const row = latency.rows[0]!;
    return {
      window,
      since: since.toISOString(),
      requests,
      by_status: byStatus,
      errors: failed,
      error_rate: requests === 0 ? null : failed / requests,
      latency_ms: { p50: round(row.p50), p95: round(row.p95), p99: round(row.p99), max: round(row.max) },
      top_errors: errors.rows,
    };
  }
}

function sinceOf(window: UsageWindow): Date {
  return new Date(Date.now() - USAGE_WINDOWS[window] * 1000);
}
