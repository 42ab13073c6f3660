// A project's usage caps on its models (SPEC.md Errors rule 2): `rpm_limit` model calls and `tpm_limit` tokens per
// minute, and a spend cap per day or month. Answered with 429 and the reset time, never by delaying: a caller that
// is told when to come back can decide for itself. Counters live on the event port, shared by every replica.
import { AppError } from '@agentplane/lib/errors';
import type { Counters } from '@agentplane/lib/events/port';
import type { UsageLimits } from '../tenants/configuration.js';
import { tenantEventPrefix } from '../tenants/keys.js';

export type { UsageLimits };

const MINUTE = 60;
/** Spend is counted in millionths of a dollar: counters are integers. */
const MICRO = 1_000_000;

const rateLimited = (message: string, resetAt: Date | null, code: string) =>
  new AppError('rate_limited', message, { code, extra: resetAt ? { reset_at: resetAt.toISOString() } : {}, ...(resetAt ? { retryAt: resetAt } : {}) });

export class UsageLimiter {
  constructor(
    private readonly counters: Counters,
    /** Told of each refusal, by its code (the runtime's metrics). */
    private readonly onRefused?: (code: string) => void,
  ) {}

  /** Refuses when any cap is already reached, without counting anything: the check before a turn persists anything. */
  async check(tenantId: string, limits: UsageLimits | undefined, now = new Date()): Promise<void> {
    if (!limits) return;
    await this.counted(this.checkNow(tenantId, limits, now));
  }

  /** Counts one model call and refuses it when it is over a cap. Called right before every call to a provider. */
  async acquire(tenantId: string, limits: UsageLimits | undefined, now = new Date()): Promise<void> {
    if (!limits) return;
    await this.counted(this.acquireNow(tenantId, limits, now));
  }

  /** A refusal, told by its code, then thrown on. */
  private async counted(work: Promise<void>): Promise<void> {
    try {
      await work;
    } catch (error) {
      if (error instanceof AppError && error.kind === 'rate_limited') this.onRefused?.(error.code ?? 'rate_limited');
      throw error;
    }
  }

  private async checkNow(tenantId: string, limits: UsageLimits, now: Date): Promise<void> {
    const keys = keysOf(tenantId, now, limits);
    if (limits.rpm_limit !== undefined) {
      const rpm = await this.counters.get(keys.rpm);
      if (rpm.value >= limits.rpm_limit) throw rpmReached(limits.rpm_limit, rpm.resetAt);
    }
    await this.checkTokensAndSpend(keys, limits);
  }

  private async acquireNow(tenantId: string, limits: UsageLimits, now: Date): Promise<void> {
    const keys = keysOf(tenantId, now, limits);
    await this.checkTokensAndSpend(keys, limits);
    if (limits.rpm_limit !== undefined) {
      const rpm = await this.counters.increment(keys.rpm, 1, MINUTE);
      if (rpm.value > limits.rpm_limit) throw rpmReached(limits.rpm_limit, rpm.resetAt);
    }
  }

  /** Adds what a finished call used. */
  async record(tenantId: string, limits: UsageLimits | undefined, used: { tokens: number; costUsd: number | null }, now = new Date()): Promise<void> {
    if (!limits) return;
    const keys = keysOf(tenantId, now, limits);
    if (limits.tpm_limit !== undefined && used.tokens > 0) await this.counters.increment(keys.tpm, used.tokens, MINUTE);
    if (limits.budget && keys.budget && used.costUsd) {
      await this.counters.increment(keys.budget.key, Math.ceil(used.costUsd * MICRO), keys.budget.windowSeconds);
    }
  }

  private async checkTokensAndSpend(keys: ReturnType<typeof keysOf>, limits: UsageLimits): Promise<void> {
    if (limits.tpm_limit !== undefined) {
      const tpm = await this.counters.get(keys.tpm);
      if (tpm.value >= limits.tpm_limit) {
        throw rateLimited(
          `token rate limit reached: ${limits.tpm_limit} tokens per minute for this project; it resets at ${iso(tpm.resetAt)}`,
          tpm.resetAt,
          'rate_limited',
        );
      }
    }
    if (limits.budget && keys.budget) {
      const spent = await this.counters.get(keys.budget.key);
      if (spent.value >= Math.round(limits.budget.amount_usd * MICRO)) {
        throw rateLimited(
          `spend cap reached: $${limits.budget.amount_usd} per ${limits.budget.window} for this project; it resets at ${keys.budget.resetAt.toISOString()}, or raise the cap`,
          keys.budget.resetAt,
          'budget_exceeded',
        );
      }
    }
  }
}

const rpmReached = (limit: number, resetAt: Date | null) =>
  rateLimited(`rate limit reached: ${limit} model requests per minute for this project; it resets at ${iso(resetAt)}`, resetAt, 'rate_limited');

const iso = (date: Date | null) => (date ?? new Date(Date.now() + MINUTE * 1000)).toISOString();

/**
 * Rate windows are fixed 60-second windows started by the first call. Spend windows are calendar days and months in
 * UTC, keyed by their date, so "resets at" is a time a person recognises (midnight, the first of the month).
 */
function keysOf(tenantId: string, now: Date, limits: UsageLimits) {
  const prefix = `${tenantEventPrefix(tenantId)}limits:`;
  let budget: { key: string; windowSeconds: number; resetAt: Date } | undefined;
  if (limits.budget) {
    const day = now.toISOString().slice(0, 10);
    const resetAt =
      limits.budget.window === 'day'
        ? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1))
        : new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
    const label = limits.budget.window === 'day' ? day : day.slice(0, 7);
    budget = { key: `${prefix}spend:${label}`, windowSeconds: Math.max(1, Math.ceil((resetAt.getTime() - now.getTime()) / 1000)), resetAt };
  }
  return { rpm: `${prefix}rpm`, tpm: `${prefix}tpm`, budget };
}
