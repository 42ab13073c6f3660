// A project's usage caps on its models (SPEC.md Errors rule 2): `rpm_limit` model calls and `tpm_limit` tokens per
// minute, and a spend cap per day or month. Answered with 429 and the reset time, never by delaying: a caller that
// is told when to come back can decide for itself. Counters live on the event port, shared by every replica. Each
// model call reserves its estimate before it is sent and settles with what it used (docs/decisions/0075), so the
// caps hold under concurrent turns.
import { AppError } from '@agentplane/lib/errors';
import type { CounterClaim, Counters, HeldClaim } from '@agentplane/lib/events/port';
import type { Usage } from '../models/port.js';
import type { UsageLimits } from '../tenants/configuration.js';
import { OutputAllowances, type PlannedCall } from './estimate.js';
import { tenantEventPrefix } from '../tenants/keys.js';

export type { UsageLimits, PlannedCall };

const MINUTE = 60;
/** Spend is counted in millionths of a dollar: counters are integers. */
const MICRO = 1_000_000;

const rateLimited = (message: string, resetAt: Date | null, code: string) =>
  new AppError('rate_limited', message, { code, extra: resetAt ? { reset_at: resetAt.toISOString() } : {}, ...(resetAt ? { retryAt: resetAt } : {}) });

/** A model call's claim on the project's caps, made before the call and settled once after it. */
export interface Admission {
  /**
   * Replaces the call's estimate with what it used (`null`: the call reported nothing, having failed or been
   * stopped, and counts nothing, as before reservations). Later calls are no-ops.
   */
  settle(used: { usage: Usage; costUsd: number | null } | null): Promise<void>;
}

/** The admission of a project without token or spend caps: nothing held, nothing to settle. */
const NOTHING_HELD: Admission = { settle: async () => undefined };

export class UsageLimiter {
  /** What each project's models wrote lately, for the estimates (per process). */
  private readonly outputs = new OutputAllowances();

  constructor(
    private readonly counters: Counters,
    /** Told of each refusal, by its code (the runtime's metrics). */
    private readonly onRefused?: (code: string) => void,
    /** Told of a settlement that failed; the call's estimate then stays counted until its window ends. */
    private readonly onUnsettled?: (error: unknown) => void,
  ) {}

  /**
   * Refuses when any cap is already reached, counting and reserving nothing: the check before a turn persists
   * anything. One round trip, and none for a project without caps.
   */
  async check(tenantId: string, limits: UsageLimits | undefined, now = new Date()): Promise<void> {
    if (!limits) return;
    const keys = keysOf(tenantId, now, limits);
    await this.claim(keys, limits, { rpm: 0, tokens: 0, micros: 0 });
  }

  /**
   * Admits one model call, or refuses it (429) when a cap has no headroom left. The call counts against `rpm_limit`
   * and reserves its estimated tokens and cost, in one atomic round trip shared by every replica, so concurrent calls
   * each see the others' reservations; the caller settles the admission once the call is over. Called right before
   * every call to a provider.
   */
  async admit(tenantId: string, limits: UsageLimits | undefined, planned: () => PlannedCall, now = new Date()): Promise<Admission> {
    if (!limits) return NOTHING_HELD;
    const keys = keysOf(tenantId, now, limits);
    // The call is described, and estimated, only for the caps that need it: a project with only an rpm cap pays for
    // neither.
    const call = limits.tpm_limit !== undefined || keys.budget ? planned() : undefined;
    const estimate = call ? this.outputs.estimate(tenantId, call) : { tokens: 0, costUsd: null };
    const held = await this.claim(keys, limits, { rpm: 1, tokens: estimate.tokens, micros: micros(estimate.costUsd) });
    let settled = false;
    return {
      settle: async (used) => {
        if (settled) return;
        settled = true;
        if (used && call) this.outputs.observe(tenantId, call.model, used.usage.outputTokens);
        // A call counts once against rpm_limit whatever it did; its tokens and spend become what it used.
        const settlements = held
          .filter((claim) => claim.key !== keys.rpm)
          .map((claim) => ({ held: claim, used: !used ? 0 : claim.key === keys.tpm ? used.usage.inputTokens + used.usage.outputTokens : micros(used.costUsd) }));
        if (settlements.length === 0) return;
        try {
          await this.counters.settle(settlements);
        } catch (error) {
          // The call is over and its answer stands; the estimate stays counted until its window ends.
          this.onUnsettled?.(error);
        }
      },
    };
  }

  /** One reservation over every cap the project set; a refusal is thrown as the 429 of the cap that was reached. */
  private async claim(keys: ReturnType<typeof keysOf>, limits: UsageLimits, amounts: { rpm: number; tokens: number; micros: number }): Promise<HeldClaim[]> {
    const claims: CounterClaim[] = [];
    if (limits.rpm_limit !== undefined) claims.push({ key: keys.rpm, amount: amounts.rpm, limit: limits.rpm_limit, windowSeconds: MINUTE });
    if (limits.tpm_limit !== undefined) claims.push({ key: keys.tpm, amount: amounts.tokens, limit: limits.tpm_limit, windowSeconds: MINUTE });
    if (limits.budget && keys.budget) {
      claims.push({ key: keys.budget.key, amount: amounts.micros, limit: Math.round(limits.budget.amount_usd * MICRO), windowSeconds: keys.budget.windowSeconds });
    }
    if (claims.length === 0) return [];
    const reservation = await this.counters.reserve(claims);
    if (reservation.admitted) return reservation.held;
    const refusal = refusalOf(reservation.refused.key, keys, limits, reservation.resetAt);
    this.onRefused?.(refusal.code ?? 'rate_limited');
    throw refusal;
  }
}

/**
 * Spend in whole millionths of a dollar, rounded up: counters are integers. Held below 2^48 so that no price, however
 * absurd, makes a claim the counters refuse as not an integer (a cap is reached long before).
 */
const micros = (costUsd: number | null) => (costUsd ? Math.min(Math.ceil(costUsd * MICRO), 2 ** 48) : 0);

function refusalOf(key: string, keys: ReturnType<typeof keysOf>, limits: UsageLimits, resetAt: Date | null): AppError {
  if (key === keys.rpm) return rpmReached(limits.rpm_limit!, resetAt);
  if (key === keys.tpm) {
    return rateLimited(`token rate limit reached: ${limits.tpm_limit} tokens per minute for this project; it resets at ${iso(resetAt)}`, resetAt, 'rate_limited');
  }
  return rateLimited(
    `spend cap reached: $${limits.budget!.amount_usd} per ${limits.budget!.window} for this project; it resets at ${keys.budget!.resetAt.toISOString()}, or raise the cap`,
    keys.budget!.resetAt,
    'budget_exceeded',
  );
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
