// Signatures of outbound deliveries (SPEC.md Outbound deliveries). A webhook tool's call: `sha256=` and the hex
// HMAC-SHA256 of the raw body under the tool's secret; while a rotated secret still verifies, the header carries one
// value per live secret, newest first, separated by commas, and a receiver accepts the body when any matches. An
// event sent to the project (below) is signed with the id and time of the delivery too, so a replay can be refused.
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

/**
 * Events the service sends a project (`turn.stopped`, `scheduled_task.fired`; docs/decisions/0059): Standard
 * Webhooks' construction under this service's header names. The signed content is `<id>.<timestamp>.<raw body>`,
 * `X-Signature` is `v1=` and its hex HMAC-SHA256 under the project's webhook secret, `X-Delivery-Id` the event's id
 * (the same on every attempt) and `X-Delivery-Timestamp` the attempt's time in Unix seconds. A receiver that checks
 * the signature, refuses a timestamp far from its clock and remembers the ids it handled refuses a replay.
 */
export const EVENT_SIGNATURE_VERSION = 'v1';
export const EVENT_TIMESTAMP_TOLERANCE_SECONDS = 300;

export function eventSignature(secret: string, id: string, timestamp: number, body: string | Buffer): string {
  return `${EVENT_SIGNATURE_VERSION}=${createHmac('sha256', secret).update(`${id}.${timestamp}.`).update(body).digest('hex')}`;
}

/** A receiver's check: the signature matches and the timestamp is within the tolerance of `now` (Unix seconds). */
export function verifyEventSignature(
  header: string | undefined,
  delivery: { id: string; timestamp: string | number | undefined; body: string | Buffer },
  secret: string,
  now = Math.floor(Date.now() / 1000),
): boolean {
  const timestamp = Number(delivery.timestamp);
  if (!header || !Number.isInteger(timestamp) || Math.abs(now - timestamp) > EVENT_TIMESTAMP_TOLERANCE_SECONDS) return false;
  const expected = Buffer.from(eventSignature(secret, delivery.id, timestamp, delivery.body));
  const candidate = Buffer.from(header.trim());
  return candidate.length === expected.length && timingSafeEqual(candidate, expected);
}
