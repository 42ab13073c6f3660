// A project's browser settings (docs/decisions/0090): which model answers the hand-off check, and how often a
// conversation may ask it. The control plane holds them (`PUT /api/projects/:id/browser`) and pushes them in the
// configuration; the runtime reads them for every check. One schema for both sides.
import { z } from 'zod';

export const BROWSER_DEFAULTS = {
  handoff_checks_per_minute: 6,
} as const;

/** The four words the hand-off check may answer, and nothing else. */
export const HANDOFF_CHECK_RESULTS = ['done', 'not_done', 'stuck', 'unsure'] as const;
export type HandoffCheckResult = (typeof HANDOFF_CHECK_RESULTS)[number];

export const BrowserSettingsSchema = z
  .strictObject({
    handoff_check_model: z
      .string()
      .min(1)
      .max(256)
      .nullable()
      .default(null)
      .meta({ description: "The model that answers the hand-off check, best a small one the project registered; null: the conversation's model, else the project's default" }),
    handoff_checks_per_minute: z
      .int()
      .min(1)
      .max(60)
      .default(BROWSER_DEFAULTS.handoff_checks_per_minute)
      .meta({ description: 'How many hand-off checks one conversation may ask for a minute; more answer 429 with Retry-After' }),
  })
  .meta({ id: 'BrowserSettings' });
export type BrowserSettings = z.infer<typeof BrowserSettingsSchema>;

/** The settings in force: the project's, the defaults filled where it set none. */
export function browserSettingsOf(section: Partial<BrowserSettings> | undefined): BrowserSettings {
  return { handoff_check_model: null, ...BROWSER_DEFAULTS, ...(section ?? {}) };
}

/**
 * The browser Pod's credential (docs/decisions/0092): the token the runtime sends its server's gate
 * (`Authorization: Bearer`). URL-safe, and long enough not to be guessed.
 */
export const BROWSER_TOKEN_RULE = 'at least 32 characters of A-Z, a-z, 0-9, - and _';

export function isBrowserToken(token: string): boolean {
  return /^[A-Za-z0-9_-]{32,256}$/.test(token);
}
