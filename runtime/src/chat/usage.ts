// Every model call's token usage and cost, recorded per tenant, model and session (the usage views read these
// rows), and added to the project's rate and spend counters.
import type { Kysely } from 'kysely';
import type { Usage } from '../models/port.js';
import type { RuntimeSchema } from '../store/schema.js';
import type { UsageLimiter, UsageLimits } from './limits.js';
import type { ModelPrice } from '../tenants/configuration.js';
import { costOf } from './model-choice.js';
import type { UsageRow } from './turn-records.js';

export interface UsageEntry {
  tenantId: string;
  sessionId: string;
  runId: string | null;
  model: string;
  price: ModelPrice | undefined;
  limits: UsageLimits | undefined;
  usage: Usage;
  /** turn, title, followups or recap. */
  purpose: string;
}

export class UsageRecorder {
  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly limiter: UsageLimiter,
  ) {}

  /** Records one call and returns its cost (null when the project set no price for the model). */
  async record(entry: UsageEntry): Promise<number | null> {
    const cost = await this.count(entry);
    await this.write(entry, {
      model: entry.model,
      purpose: entry.purpose,
      inputTokens: entry.usage.inputTokens,
      outputTokens: entry.usage.outputTokens,
      costUsd: cost,
    });
    return cost;
  }

  /** Adds a call to the project's rate and spend counters and returns its cost; the row is written separately. */
  async count(entry: Pick<UsageEntry, 'tenantId' | 'price' | 'limits' | 'usage'>): Promise<number | null> {
    const cost = costOf(entry.price, entry.usage);
    await this.limiter.record(entry.tenantId, entry.limits, { tokens: entry.usage.inputTokens + entry.usage.outputTokens, costUsd: cost });
    return cost;
  }

  /** Writes a call's usage row (a turn's last step writes it with the statement that ends the run instead). */
  async write(where: Pick<UsageEntry, 'tenantId' | 'sessionId' | 'runId'>, row: UsageRow): Promise<void> {
    await this.db
      .insertInto('usage_records')
      .values({
        tenant_id: where.tenantId,
        session_id: where.sessionId,
        run_id: where.runId,
        model: row.model,
        purpose: row.purpose,
        input_tokens: row.inputTokens,
        output_tokens: row.outputTokens,
        cost_usd: row.costUsd,
      })
      .execute();
  }
}
