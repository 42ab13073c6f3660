// The runtime's own Prometheus metrics, beside the HTTP ones (SPEC.md `/metrics`; docs/decisions/0063): turns by how
// they ended, tokens and cost, limit refusals, event deliveries, task fires and trigger events. Labels are small
// fixed sets (never a tenant, session or subject), so the series count stays bounded however many tenants there are.
import { Counter, Registry } from 'prom-client';

export class RuntimeMetrics {
  readonly registry = new Registry();
  private readonly turns = new Counter({
    name: 'agentplane_turns_total',
    help: 'Turns that ended, by status (completed, requires_action, cancelled, failed)',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  private readonly tokens = new Counter({
    name: 'agentplane_model_tokens_total',
    help: 'Tokens of model calls, by direction (input, output)',
    labelNames: ['direction'] as const,
    registers: [this.registry],
  });
  private readonly cost = new Counter({ name: 'agentplane_model_cost_usd_total', help: "Spend of model calls at the projects' prices, in USD", registers: [this.registry] });
  private readonly refusals = new Counter({
    name: 'agentplane_limit_refusals_total',
    help: 'Requests and calls refused by a limit, by its code (rate_limited, budget_exceeded, trigger_rate_limited, ...)',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  private readonly deliveries = new Counter({
    name: 'agentplane_event_delivery_attempts_total',
    help: 'Attempts to deliver an event to a project, by outcome (delivered, retry, dead)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  private readonly fires = new Counter({ name: 'agentplane_task_fires_total', help: 'Scheduled task fires whose run started', registers: [this.registry] });
  private readonly triggerEvents = new Counter({
    name: 'agentplane_trigger_events_total',
    help: 'Events posted to triggers, by outcome (accepted, duplicate)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  turnEnded(status: string): void {
    this.turns.inc({ status: ['completed', 'requires_action', 'cancelled', 'failed'].includes(status) ? status : 'other' });
  }

  usage(inputTokens: number, outputTokens: number, costUsd: number | null): void {
    this.tokens.inc({ direction: 'input' }, inputTokens);
    this.tokens.inc({ direction: 'output' }, outputTokens);
    if (costUsd !== null && costUsd > 0) this.cost.inc(costUsd);
  }

  refused(code: string): void {
    this.refusals.inc({ code });
  }

  delivery(outcome: 'delivered' | 'retry' | 'dead'): void {
    this.deliveries.inc({ outcome });
  }

  taskFired(): void {
    this.fires.inc();
  }

  triggerEvent(outcome: 'accepted' | 'duplicate'): void {
    this.triggerEvents.inc({ outcome });
  }
}
