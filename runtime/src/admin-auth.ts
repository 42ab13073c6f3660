// The key guards of the runtime's non-bearer surfaces, compared in constant time; missing and wrong answer alike:
// X-Admin-Key on the tenant routes, X-Fire-Key on the route a task's CronJob fires through.
import type { Guard } from '@agentplane/lib/http/routes';
import { secretsEqual } from '@agentplane/lib/crypto/secret-box';
import { unauthenticated } from '@agentplane/lib/errors';

function keyGuard(header: 'X-Admin-Key' | 'X-Fire-Key', key: string | undefined): Guard {
  return (req) => {
    const presented = req.get(header);
    // No key configured (not on Kubernetes): nothing is accepted.
    if (key === undefined || presented === undefined || !secretsEqual(presented, key)) throw unauthenticated(`missing or invalid ${header}`);
  };
}

export const adminKeyGuard = (adminKey: string): Guard => keyGuard('X-Admin-Key', adminKey);

/** The fire key the operator keeps in the project's Secret; unset, task fires are refused. */
export const fireKeyGuard = (fireKey: string | undefined): Guard => keyGuard('X-Fire-Key', fireKey);
