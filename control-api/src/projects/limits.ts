// A project's usage caps on its models (SPEC.md Limits: `rpmLimit`, `tpmLimit`, a spend cap): the wire schemas,
// the patch applied to the project row, and the form pushed to the runtime, which enforces them
// (docs/decisions/0018).
import { z } from 'zod';
import type { PushedLimits } from '../provisioning/provisioner.js';
import type { BudgetWindow, ControlSchema } from '../store/schema.js';

// The columns are PostgreSQL `integer`.
const maxIntegerLimit = 2_147_483_647;

const rateLimit = (what: string) => z.number().int().min(1).max(maxIntegerLimit).meta({ description: what });

const Budget = z
  .strictObject({
    amountUsd: z.number().positive().max(1_000_000_000).meta({ description: 'Spend cap in USD, computed from the providers\' prices' }),
    window: z.enum(['day', 'month']).meta({ description: 'The calendar window (UTC) the cap applies to' }),
  })
  .meta({ id: 'Budget' });

export const LimitsPatch = z
  .strictObject({
    rpmLimit: rateLimit('Model calls per 60-second window; null clears it').nullable().optional(),
    tpmLimit: rateLimit('Input plus output tokens per 60-second window; null clears it').nullable().optional(),
    budget: Budget.nullable().optional().meta({ description: 'Spend cap per window (replaced whole); null clears it' }),
  })
  .meta({ id: 'LimitsPatch', description: 'A member omitted keeps its value; null clears it' });

export const LimitsOut = z
  .object({
    rpmLimit: z.number().int().nullable().meta({ description: 'null: no cap' }),
    tpmLimit: z.number().int().nullable().meta({ description: 'null: no cap' }),
    budget: Budget.nullable().meta({ description: 'null: no cap' }),
    warnings: z
      .array(z.string())
      .optional()
      .meta({ description: 'Present when a budget is set and some registered model has no price: its calls count no cost' }),
  })
  .meta({ id: 'Limits' });

export type LimitsPatchInput = z.infer<typeof LimitsPatch>;
export type LimitsView = z.infer<typeof LimitsOut>;

type LimitColumns = Pick<ControlSchema['projects'], 'rpm_limit' | 'tpm_limit' | 'budget_amount_usd' | 'budget_window'>;

/** The project columns a patch sets: omitted members are left out, null clears. */
export function limitsChange(patch: LimitsPatchInput): Partial<LimitColumns> {
  return {
    ...(patch.rpmLimit === undefined ? {} : { rpm_limit: patch.rpmLimit }),
    ...(patch.tpmLimit === undefined ? {} : { tpm_limit: patch.tpmLimit }),
    ...(patch.budget === undefined
      ? {}
      : { budget_amount_usd: patch.budget?.amountUsd ?? null, budget_window: (patch.budget?.window ?? null) as BudgetWindow | null }),
  };
}

/** The caps as answered; `unpriced` are registered models without a price, worth a warning only under a budget. */
export function limitsView(row: LimitColumns, unpriced: string[]): LimitsView {
  const budget = row.budget_amount_usd !== null && row.budget_window !== null ? { amountUsd: row.budget_amount_usd, window: row.budget_window } : null;
  const warnings =
    budget && unpriced.length > 0
      ? [
          `no price is set for ${unpriced.map((m) => `'${m}'`).join(', ')}: calls to ${unpriced.length === 1 ? 'it' : 'them'} count no cost against the budget. Register the provider again with \`prices\` to count them`,
        ]
      : [];
  return { rpmLimit: row.rpm_limit, tpmLimit: row.tpm_limit, budget, ...(warnings.length > 0 ? { warnings } : {}) };
}

/** The caps as the runtime receives them, each only when set; undefined when there are none. */
export function pushedLimits(row: LimitColumns): PushedLimits | undefined {
  const limits: PushedLimits = {
    ...(row.rpm_limit === null ? {} : { rpm_limit: row.rpm_limit }),
    ...(row.tpm_limit === null ? {} : { tpm_limit: row.tpm_limit }),
    ...(row.budget_amount_usd !== null && row.budget_window !== null ? { budget: { amount_usd: row.budget_amount_usd, window: row.budget_window } } : {}),
  };
  return Object.keys(limits).length > 0 ? limits : undefined;
}
