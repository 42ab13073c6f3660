// The values of the project runtime's Secret: kept from the Secret as it is (so keys never rotate behind the
// runtime's back, and an admin may bring their own), generated when missing.
import { randomBytes } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';

/** The Secret's values as text; {} when it does not exist. */
export function secretValues(secret: k8s.V1Secret | null): Record<string, string> {
  const values: Record<string, string> = {};
  for (const [key, value] of Object.entries(secret?.data ?? {})) values[key] = Buffer.from(value, 'base64').toString('utf8');
  for (const [key, value] of Object.entries(secret?.stringData ?? {})) values[key] = value;
  return values;
}

/** A new admin key: 64 hex characters (the runtime wants at least 32). */
export const newAdminKey = () => randomBytes(32).toString('hex');

/** A new master key: 32 random bytes, base64, as the runtime's AGENTPLANE_MASTER_KEY reads it. */
export const newMasterKey = () => randomBytes(32).toString('base64');

/** A new database password: URL-safe, so it sits in a connection URL unescaped. */
export const newDatabasePassword = () => randomBytes(24).toString('base64url');

/** A new browser token: what the runtime shows the browser server's gate, URL-safe (lib/src/browser.ts's rule). */
export const newBrowserToken = () => randomBytes(32).toString('base64url');
