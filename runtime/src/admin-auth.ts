// The key guards of the runtime's non-bearer surfaces, compared in constant time; missing and wrong answer alike:
// X-Admin-Key on the tenant routes, X-Fire-Key on the route a task's CronJob fires through.
import type { Guard } from '@agentplane/lib/http/routes';
import { secretsEqual } from '@agentplane/lib/crypto/secret-box';
import { notFound, unauthenticated } from '@agentplane/lib/errors';

function keyGuard(header: 'X-Admin-Key' | 'X-Fire-Key', key: string | undefined): Guard {
  return (req) => {
    const presented = req.get(header);
    // No key configured (not on Kubernetes): nothing is accepted.
    if (key === undefined || presented === undefined || !secretsEqual(presented, key)) throw unauthenticated(`missing or invalid ${header}`);
  };
}

export const adminKeyGuard = (adminKey: string): Guard => keyGuard('X-Admin-Key', adminKey);

/** Headers a reverse proxy (an ingress controller) adds to what it forwards; a Job's Pod calling the Service sends none. */
const PROXIED = ['forwarded', 'x-forwarded-for', 'x-real-ip'];

/**
 * The fire key the operator keeps in the project's Secret; unset, task fires are refused. The route is for the
 * project's own Jobs, in its namespace: a request that came through a proxy (the project's Ingress reaches every
 * path) is answered as if the route did not exist, whatever key it carries.
 */
export function fireKeyGuard(fireKey: string | undefined): Guard {
  const guard = keyGuard('X-Fire-Key', fireKey);
  return (req, res) => {
    // Worded as the answer to a path no route serves.
    if (PROXIED.some((header) => req.get(header) !== undefined)) throw notFound(`no route for ${req.method} ${req.path}`, { code: 'no_route' });
    return guard(req, res);
  };
}
