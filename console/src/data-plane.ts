// The console's data-plane clients (docs/decisions/0085): end-user tokens minted by the signed-in account for a
// subject it names, sent through the control plane's /console/data/{projectId} (the console's own origin). A token
// lives 15 minutes; the client asks for the next one before it expires.
import { useMemo } from 'react';
import { createDataPlaneClient, type DataPlaneClient, type MintRequest } from '@agentplane/client';
import { useControlPlane } from './session.js';

/** Seconds a console-minted token lives: a playground is short work, and the token never leaves this tab. */
const TOKEN_SECONDS = 15 * 60;

/** A data-plane client for the project that acts as the grant's subject (with its roles and capabilities). */
export function useDataPlane(projectId: string, grant: MintRequest): DataPlaneClient {
  const control = useControlPlane();
  const key = JSON.stringify(grant);
  return useMemo(
    () =>
      createDataPlaneClient({
        baseUrl: `${window.location.origin}/console/data/${projectId}`,
        token: async () => (await control.mintToken(projectId, { ...grant, expiresIn: TOKEN_SECONDS })).access_token,
        // A turn may take longer than a minute before its first frame only rarely; the stream then runs unbounded.
        timeoutMs: 120_000,
      }),
    // The grant is compared by value: a new object with the same fields keeps the client and its token.
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [control, projectId, key],
  );
}

/** The subject the console acts as when it reads the project's data plane for its own views: privileged (`admin`). */
export function useProjectReader(projectId: string, email: string): DataPlaneClient {
  return useDataPlane(projectId, { subject: `console:${email}`, roles: ['admin'] });
}
