// A stable fingerprint of desired content: canonical JSON (object keys sorted, undefined dropped as JSON drops it)
// hashed with sha256, so the same content always hashes the same however its objects were assembled.
import { createHash } from 'node:crypto';

/** JSON with every object's keys in sorted order; arrays keep their order, because in Kubernetes it means something. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) return item;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(item).sort()) sorted[key] = (item as Record<string, unknown>)[key];
    return sorted;
  });
}

/** The first 16 hex characters of the sha256 of `value`'s canonical JSON (stored in the spec-hash annotation). */
export function specHash(value: unknown): string {
  return createHash('sha256')
    .update(canonicalJson(value) ?? 'undefined')
    .digest('hex')
    .slice(0, 16);
}
