// What a model reads of a page: its accessibility snapshot, with what people type that must never reach a model or a
// stored message taken out. Playwright's snapshot prints a field's value, a password field's included; the hand-off
// exists so a person can type a password the agent never sees (decision 0090), so every snapshot any model reads
// (the agent's tools, the hand-off check) comes from here.
import type { Page } from 'playwright-core';

/** Fields whose values are secrets: passwords, one-time codes, card numbers and codes. */
const SECRET_FIELDS = [
  'input[type=password]',
  'input[autocomplete~="one-time-code" i]',
  'input[autocomplete~="current-password" i]',
  'input[autocomplete~="new-password" i]',
  'input[autocomplete~="cc-number" i]',
  'input[autocomplete~="cc-csc" i]',
].join(', ');

export const REDACTED = '(hidden: typed by the person)';

/**
 * The page's snapshot in Playwright's AI mode, the value of every secret field replaced. The values are read first,
 * in Playwright's isolated world (the page's script cannot answer for them), and each `textbox ...: <value>` line
 * showing one of them loses its value.
 */
export async function safeSnapshot(page: Page, timeout: number): Promise<string> {
  // Unread secrets hide every field's value: failing closed, never open.
  const values = await page
    .locator(SECRET_FIELDS)
    // Run in the page: no named function inside, which a loader that keeps names (tsx) would wrap in a helper
    // (`__name`) the page does not have.
    .evaluateAll((fields) => fields.map((field) => String((field as unknown as { value: unknown }).value)))
    .catch(() => 'unread' as const);
  const secrets = values === 'unread' ? 'all' : new Set(values.filter((value) => value !== ''));
  const snapshot = await page.ariaSnapshot({ mode: 'ai', timeout });
  if (secrets !== 'all' && secrets.size === 0) return snapshot;
  return snapshot
    .split('\n')
    .map((line) => {
      const match = /^(\s*- textbox\b.*?: )(.*)$/.exec(line);
      if (!match) return line;
      return secrets === 'all' || secrets.has(match[2]!.replace(/^"(.*)"$/, '$1')) ? `${match[1]}${REDACTED}` : line;
    })
    .join('\n');
}
