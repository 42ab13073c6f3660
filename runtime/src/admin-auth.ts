// The X-Admin-Key guard of the tenant routes: compared in constant time; missing and wrong answer alike.
import type { Guard } from '@agentplane/lib/http/routes';
import { secretsEqual } from '@agentplane/lib/crypto/secret-box';
import { unauthenticated } from '@agentplane/lib/errors';

export function adminKeyGuard(adminKey: string): Guard {
  return (req) => {
    const presented = req.get('x-admin-key');
    if (presented === undefined || !secretsEqual(presented, adminKey)) {
      throw unauthenticated('missing or invalid X-Admin-Key');
    }
  };
}
