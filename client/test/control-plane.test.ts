// The control-plane client against a real control plane: signing in (a wrong password refused and never retried, too
// many failures a RateLimitError saying when to try again), a session token's client calling the org and project
// routes, a project key's client minting, and a signed-out session refused without a replay.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControl, type TestControl } from '../../test/harness/control.js';
import { AuthenticationError, RateLimitError, createControlPlaneClient, signIn, type ControlPlane } from '../src/index.js';

const owner = { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' };

/** A fetch that counts what it sends, by method and path. */
function countingFetch() {
  const sent: string[] = [];
  const fetch = (request: Request) => {
    sent.push(`${request.method} ${new URL(request.url).pathname}`);
    return globalThis.fetch(request);
  };
  return { fetch, sent };
}

describe('the control-plane client against the control plane', () => {
  let control: TestControl;
  beforeAll(async () => {
    control = await startTestControl({ ...owner, SIGNIN_MAX_FAILURES: '3' });
  });
  afterAll(async () => {
    await control?.stop();
  });

  it('signs in with a session token that calls the org and project routes, and mints with a project key', async () => {
    const session = await signIn({ baseUrl: control.url, email: owner.AGENTPLANE_OWNER_EMAIL, password: owner.AGENTPLANE_OWNER_PASSWORD });
    expect(session.token).toMatch(/^ses_/);
    expect(Date.parse(session.expires_at)).toBeGreaterThan(Date.now());
    const account = createControlPlaneClient({ baseUrl: control.url, sessionToken: session.token });
    const me = (await account.api.GET('/api/me')).data!;
    expect(me.account.email).toBe(owner.AGENTPLANE_OWNER_EMAIL);
    const project = (await account.api.POST('/api/orgs/{orgId}/projects', { params: { path: { orgId: me.orgs[0]!.id } }, body: { name: 'client test' } })).data as ControlPlane.components['schemas']['Project'];
    const key = (await account.api.POST('/api/projects/{id}/keys', { params: { path: { id: project.id } }, body: { name: 'server', scope: 'mint' } })).data!;

    const server = createControlPlaneClient({ baseUrl: control.url, projectKey: key.key });
    const minted = await server.mintToken(project.id, { subject: 'user-1', expiresIn: 600 });
    expect(minted.token_type).toBe('Bearer');
    expect(minted.expires_in).toBe(600);
    expect(minted.tenant_id).toBe(project.tenant_id);
  });

  it('refuses a wrong password once, without retrying, and says when to try again after too many', async () => {
    const { fetch, sent } = countingFetch();
    const wrong = () => signIn({ baseUrl: control.url, email: owner.AGENTPLANE_OWNER_EMAIL, password: 'not the password', fetch, retry: { baseDelayMs: 1 } });
    const first = await wrong().catch((error: unknown) => error);
    expect(first).toBeInstanceOf(AuthenticationError);
    expect((first as AuthenticationError).status).toBe(401);
    expect(sent).toEqual(['POST /api/auth/login']);
    await wrong().catch(() => undefined);
    await wrong().catch(() => undefined);
    const locked = await wrong().catch((error: unknown) => error);
    expect(locked).toBeInstanceOf(RateLimitError);
    expect((locked as RateLimitError).detail).toMatch(/try again/i);
    // A 429 is retried by other calls; never by sign-in, where each try counts as a failure.
    expect(sent).toHaveLength(4);
  });

  it('refuses a signed-out session with an AuthenticationError, without a second try', async () => {
    // Signed in after the lock above has passed: the lock is per account and short, so wait for it.
    let session: Awaited<ReturnType<typeof signIn>> | undefined;
    const deadline = Date.now() + 60_000;
    while (!session) {
      session = await signIn({ baseUrl: control.url, email: owner.AGENTPLANE_OWNER_EMAIL, password: owner.AGENTPLANE_OWNER_PASSWORD }).catch((error: unknown) => {
        if (!(error instanceof RateLimitError) || Date.now() > deadline) throw error;
        return new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 500));
      });
    }
    const { fetch, sent } = countingFetch();
    const account = createControlPlaneClient({ baseUrl: control.url, sessionToken: session.token, fetch });
    await account.api.POST('/api/auth/logout');
    const refused = await account.api.GET('/api/me').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AuthenticationError);
    expect(sent).toEqual(['POST /api/auth/logout', 'GET /api/me']);
  });
});
