// Every model call's token usage and cost, recorded per tenant, model and session (the usage views read these
// rows), and added to the project's rate and spend counters.
import type { Kysely } from 'kysely';
import type { Usage } from '../models/port.js';
import type { RuntimeSchema } from '../store/schema.js';
import type { UsageLimiter, UsageLimits } from './limits.js';
import type { ModelPrice } from '../tenants/configuration.js';
import { costOf } from './model-choice.js';

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
    const cost = costOf(entry.price, entry.usage);
    await this.db
      .insertInto('usage_records')
      .values({
        tenant_id: entry.tenantId,
        session_id: entry.sessionId,
        run_id: entry.runId,
        model: entry.model,
        purpose: entry.purpose,
        input_tokens: entry.usage.inputTokens,
        output_tokens: entry.usage.outputTokens,
        cost_usd: cost,
      })
      .execute();
    await this.limiter.record(entry.tenantId, entry.limits, { tokens: entry.usage.inputTokens + entry.usage.outputTokens, costUsd: cost });
    return cost;
  }
}
