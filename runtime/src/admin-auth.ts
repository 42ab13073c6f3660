// The X-Admin-Key guard of the tenant routes: compared in constant time; missing and wrong answer alike.
import type { Guard } from '../../lib/src/http/routes.js';
import { secretsEqual } from '../../lib/src/crypto/secret-box.js';
import { unauthenticated } from '../../lib/src/errors.js';

export function adminKeyGuard(adminKey: string): Guard {
  return (req) => {
    const presented = req.get('x-admin-key');
    if (presented === undefined || !secretsEqual(presented, adminKey)) {
      throw unauthenticated('missing or invalid X-Admin-Key');
    }
  };
}
