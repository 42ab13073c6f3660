// The console's data-plane clients (docs/decisions/0085): end-user tokens minted by the signed-in account for a
// subject it names, sent through the control plane's /console/data/{projectId} (the console's own origin). A token
// lives 15 minutes; the client asks for the next one before it expires.
import { createDataPlaneClient, type ControlPlaneClient, type DataPlaneClient, type MintRequest } from '@agentplane/client';
import { useControlPlane } from './session.js';

/** Seconds a console-minted token lives: a playground is short work, and the token never leaves this tab. */
const TOKEN_SECONDS = 15 * 60;

/**
 * The clients made so far, by signed-in client, project and grant: every view that acts as the same subject shares
 * one client, and so one token. Signing out drops the signed-in client, and its clients with it.
 */
const clients = new WeakMap<ControlPlaneClient, Map<string, DataPlaneClient>>();

/** A data-plane client for the project that acts as the grant's subject (with its roles and capabilities). */
export function useDataPlane(projectId: string, grant: MintRequest): DataPlaneClient {
  const control = useControlPlane();
  let made = clients.get(control);
  if (!made) clients.set(control, (made = new Map()));
  const key = `${projectId} ${JSON.stringify(grant)}`;
  let client = made.get(key);
  if (!client) {
    client = createDataPlaneClient({
      baseUrl: `${window.location.origin}/console/data/${projectId}`,
      token: async () => (await control.mintToken(projectId, { ...grant, expiresIn: TOKEN_SECONDS })).access_token,
      // A turn may take longer than a minute before its first frame only rarely; the stream then runs unbounded.
      timeoutMs: 120_000,
    });
    made.set(key, client);
  }
  return client;
}

/** The subject the console acts as when it reads the project's data plane for its own views: privileged (`admin`). */
export function useProjectReader(projectId: string, email: string): DataPlaneClient {
  return useDataPlane(projectId, { subject: `console:${email}`, roles: ['admin'] });
}
