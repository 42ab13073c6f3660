// Signatures of outbound deliveries (SPEC.md Outbound deliveries): `sha256=` and the hex HMAC-SHA256 of the raw body
// under a secret. While a rotated secret still verifies, the header carries one value per live secret, newest
// first, separated by commas; a receiver accepts the body when any of them matches a secret it holds.
import { createHmac, timingSafeEqual } from 'node:crypto';

const PREFIX = 'sha256=';

/** One signature value: `sha256=<hex>`. */
export function signatureOf(secret: string, body: string | Buffer): string {
  return PREFIX + createHmac('sha256', secret).update(body).digest('hex');
}

/** The header for `body` under every live secret, newest first. */
export function signatureHeader(secrets: readonly string[], body: string | Buffer): string {
  return secrets.map((secret) => signatureOf(secret, body)).join(',');
}

/** Whether any value of `header` is the signature of `body` under `secret` (compared in constant time). */
export function verifySignature(header: string | undefined, body: string | Buffer, secret: string): boolean {
  if (!header) return false;
  const expected = Buffer.from(signatureOf(secret, body));
  return header.split(',').some((value) => {
    const candidate = Buffer.from(value.trim());
    return candidate.length === expected.length && timingSafeEqual(candidate, expected);
  });
}
