// Every model call's token usage and cost, recorded per tenant, model and session (the usage views read these
// rows), and settled against the project's token and spend caps (the call's reservation becomes what it used).
import type { Kysely } from 'kysely';
import type { Usage } from '../models/port.js';
import type { RuntimeSchema } from '../store/schema.js';
import type { Admission } from './limits.js';
import type { ModelPrice } from '../tenants/configuration.js';
import { costOf } from './model-choice.js';
import type { UsageRow } from './turn-records.js';

export interface UsageEntry {
  tenantId: string;
  sessionId: string;
  runId: string | null;
  model: string;
  price: ModelPrice | undefined;
  /** The call's reservation on the project's caps (UsageLimiter.admit). */
  admission: Admission;
  usage: Usage;
  /** turn, title, followups or recap. */
  purpose: string;
}

export class UsageRecorder {
  constructor(private readonly db: Kysely<RuntimeSchema>) {}

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

  /** Settles a call's reservation with what it used and returns its cost; the row is written separately. */
  async count(entry: Pick<UsageEntry, 'price' | 'admission' | 'usage'>): Promise<number | null> {
    const cost = costOf(entry.price, entry.usage);
    await entry.admission.settle({ usage: entry.usage, costUsd: cost });
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
