// The `bearer` security scheme of the data plane: authenticates the request's end-user token and leaves the
// principal on `res.locals` for the route to pass to its service.
import type { Response } from 'express';
import { AppError, internal } from '@agentplane/lib/errors';
import type { Guard } from '@agentplane/lib/http/routes';
import type { EndUserAuthenticator, Principal } from './authenticate.js';

export function bearerGuard(authenticator: EndUserAuthenticator): Guard {
  return async (req, res) => {
    try {
      res.locals.principal = await authenticator.authenticate({ authorization: req.get('authorization'), apiKey: req.get('x-api-key') });
    } catch (error) {
      // RFC 6750 section 3: a 401 names the scheme the caller should use.
      if (error instanceof AppError && error.kind === 'unauthenticated') res.setHeader('WWW-Authenticate', 'Bearer');
      throw error;
    }
  };
}

/** The principal the bearer guard authenticated; a route without that guard asking for one is a bug. */
export function principalOf(res: Response): Principal {
  const principal = res.locals.principal as Principal | undefined;
  if (!principal) throw internal('principal requested on a route without the bearer guard');
  return principal;
}
