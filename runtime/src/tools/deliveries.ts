// The record of webhook-tool calls (SPEC.md `GET /tools/deliveries`; docs/decisions/0052): one row per call, with an
// excerpt of what the agent was given, never the whole body and never a secret. Read by admins of the tenant (a
// privileged token on the data plane, the control plane through the admin surface); kept 30 days.
import type { Kysely, Selectable } from 'kysely';
import type { RuntimeSchema, ToolDeliveriesTable } from '../store/schema.js';

/** How much of a result a delivery record keeps. */
export const DELIVERY_EXCERPT_CHARS = 500;
/** How long delivery records are kept. */
export const DELIVERY_RETENTION_DAYS = 30;
export const DEFAULT_DELIVERIES_LIMIT = 100;
export const MAX_DELIVERIES_LIMIT = 1_000;

/** A delivery as listed. */
export interface DeliveryOut {
  id: string;
  at: string;
  tool: string;
  tool_id: string;
  session_id: string;
  run_id: string;
  subject: string;
  status: number | null;
  ok: boolean;
  attempts: number;
  duration_ms: number;
  result: string;
  error: string | null;
}

export class ToolDeliveries {
  constructor(private readonly db: Kysely<RuntimeSchema>) {}

  /** The tenant's most recent deliveries, newest first. */
  async recent(tenantId: string, limit = DEFAULT_DELIVERIES_LIMIT): Promise<DeliveryOut[]> {
    const rows = await this.db
      .selectFrom('tool_deliveries')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(deliveryOut);
  }

  /** Removes records past the retention; answers how many. */
  async prune(now = new Date()): Promise<number> {
    const before = new Date(now.getTime() - DELIVERY_RETENTION_DAYS * 86_400_000);
    const result = await this.db.deleteFrom('tool_deliveries').where('created_at', '<', before).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

function deliveryOut(row: Selectable<ToolDeliveriesTable>): DeliveryOut {
  return {
    id: row.id,
    at: row.created_at.toISOString(),
    tool: row.tool,
    tool_id: row.tool_id,
    session_id: row.session_id,
    run_id: row.run_id,
    subject: row.subject,
    status: row.status,
    ok: row.ok,
    attempts: row.attempts,
    duration_ms: row.duration_ms,
    result: row.result_excerpt,
    error: row.error,
  };
}
