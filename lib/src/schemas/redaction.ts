// How a secret is shown once stored (`****` plus its last four characters), and the check that refuses that form
// where a secret is written: a client that read a secret and sent the answer back would otherwise store the mask
// in place of the secret (docs/decisions/0025).

/** `****` plus the last four characters, or `****` alone when the value is short. */
export function redact(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length >= 12 ? `****${text.slice(-4)}` : '****';
}

/** Whether a value is in the redacted form. No real credential starts with four asterisks. */
export function isRedacted(value: unknown): boolean {
  return typeof value === 'string' && value.startsWith('****');
}

/** The refusal's wording, after the field's name. */
export const redactedSecretMessage = 'is a redacted secret (`****...`, as secrets are shown); send the secret itself';
