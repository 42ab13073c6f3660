// Signing in and the org routes through HTTP, on the embedded store and on PostgreSQL + Redis.
import { rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresBinaries, startPostgres, type PostgresServer } from '@agentplane/test/harness/postgres';
import { makeTempDir } from '@agentplane/test/harness/process';
import { redisServerBinary, startRedis, type RedisServer } from '@agentplane/test/harness/redis';
import { startTestControl, type TestControl } from '@agentplane/test/harness/control';
import { defaultOwnerEmail } from '../app.js';
import { projectKeyOnOrgRoute } from './routes.js';

const setups = postgresBinaries() && redisServerBinary() ? (['embedded', 'scale'] as const) : (['embedded'] as const);

const ownerEmail = 'Owner@Example.com';
const ownerPassword = 'correct horse battery staple';

describe.each(setups)('accounts and org routes (%s)', (setup) => {
  let postgres: PostgresServer | undefined;
  let redis: RedisServer | undefined;
  let dataDir: string;
  let api: TestControl;

  const call = (path: string, init: RequestInit & { token?: string } = {}) => {
    const headers = new Headers(init.headers);
    if (init.token) headers.set('authorization', `Bearer ${init.token}`);
    if (init.body !== undefined) headers.set('content-type', 'application/json');
    return fetch(`${api.url}${path}`, { ...init, headers });
  };
  const login = async (email: string, password: string) => call('/api/auth/login', { method: 'POST', body: JSON.stringify({ email, password }) });
  /** Signs in from another local address (fetch cannot choose one). */
  const loginFrom = (localAddress: string, email: string, password: string) =>
    new Promise<{ status: number }>((resolve, reject) => {
      const body = JSON.stringify({ email, password });
      const req = request(`${api.url}/api/auth/login`, { method: 'POST', localAddress, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
      });
      req.on('error', reject);
      req.end(body);
    });

  beforeAll(async () => {
    dataDir = makeTempDir('control-accounts');
    const env: Record<string, string> = {
      AGENTPLANE_DATA_DIR: dataDir,
      AGENTPLANE_OWNER_EMAIL: ownerEmail,
      AGENTPLANE_OWNER_PASSWORD: ownerPassword,
      SIGNIN_MAX_FAILURES: '3',
    };
    if (setup === 'scale') {
      [postgres, redis] = await Promise.all([startPostgres(), startRedis(redisServerBinary()!)]);
      env.CONTROL_DATABASE_URL = await postgres.createDatabase();
      env.REDIS_URL = redis.url;
    }
    api = await startTestControl(env);
  });
  afterAll(async () => {
    await api?.stop();
    await Promise.all([postgres?.stop(), redis?.stop()]);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('signs the first owner in (email case-insensitive), shows the account and its org, and signs out', async () => {
    const res = await login('owner@example.com', ownerPassword);
    expect(res.status).toBe(200);
    const session = (await res.json()) as { token: string; expires_at: string; account: { email: string } };
    expect(session.token).toMatch(/^ses_[A-Za-z0-9_-]{43}$/);
    expect(session.account.email).toBe('owner@example.com');
    expect(new Date(session.expires_at).getTime()).toBeGreaterThan(Date.now() + 6 * 24 * 3600 * 1000);

    const me = (await (await call('/api/me', { token: session.token })).json()) as { account: { email: string }; orgs: { role: string }[] };
    expect(me.account.email).toBe('owner@example.com');
    expect(me.orgs).toEqual([expect.objectContaining({ name: 'default', role: 'owner' })]);

    expect((await call('/api/auth/logout', { method: 'POST', token: session.token })).status).toBe(204);
    const after = await call('/api/me', { token: session.token });
    expect(after.status).toBe(401);
    expect(await after.json()).toMatchObject({ detail: 'not signed in: the session token is unknown or was signed out' });
  });

  it('answers a wrong password and an unknown email alike', async () => {
    const wrong = await login(ownerEmail, 'not the password');
    const unknown = await login('nobody@example.com', 'whatever it is');
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    // Alike but for the id of the request itself.
    const { request_id: _wrongId, ...wrongBody } = (await wrong.json()) as Record<string, unknown>;
    const { request_id: _unknownId, ...unknownBody } = (await unknown.json()) as Record<string, unknown>;
    expect(wrongBody).toEqual(unknownBody);
  });

  it('makes a pair that keeps failing wait longer each time: one more try per wait, each failure doubling it', async () => {
    const dir = makeTempDir('control-waits');
    const limited = await startTestControl({ AGENTPLANE_DATA_DIR: dir, SIGNIN_MAX_FAILURES: '2', SIGNIN_LOCK_SECONDS: '1', AGENTPLANE_OWNER_EMAIL: 'waits@example.com', AGENTPLANE_OWNER_PASSWORD: ownerPassword });
    try {
      const attempt = (password: string) =>
        fetch(`${limited.url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'waits@example.com', password }) });
      /** Waits out the current lock, then answers the first attempt that is not refused with 429. */
      const afterTheWait = async (password: string) => {
        for (;;) {
          const res = await attempt(password);
          if (res.status !== 429) return res;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      };
      expect((await attempt('wrong 1')).status).toBe(401);
      expect((await attempt('wrong 2')).status).toBe(401);
      const first = await attempt(ownerPassword);
      expect(first.status).toBe(429);
      expect(first.headers.get('retry-after')).toBe('1');
      expect((await afterTheWait('wrong 3')).status).toBe(401);
      const second = await attempt(ownerPassword);
      expect(second.status).toBe(429);
      expect(second.headers.get('retry-after')).toBe('2');
      // The right password, once the wait is over, signs in and clears the count.
      expect((await afterTheWait(ownerPassword)).status).toBe(200);
      expect((await attempt('wrong again')).status).toBe(401);
    } finally {
      await limited.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('limits guessing across many emails from one address', async () => {
    const dir = makeTempDir('control-addr');
    const limited = await startTestControl({ AGENTPLANE_DATA_DIR: dir, SIGNIN_MAX_FAILURES_PER_ADDRESS: '4' });
    try {
      const attempt = (email: string) =>
        fetch(`${limited.url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'guess' }) });
      for (let i = 0; i < 4; i++) expect((await attempt(`victim${i}@example.com`)).status).toBe(401);
      expect((await attempt('victim-next@example.com')).status).toBe(429);
    } finally {
      await limited.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('limits repeated failures for an email with 429 naming when to retry, even for the right password', async () => {
    const email = `limited-${setup}@example.com`;
    await api.control.accounts.createOwner(email, ownerPassword, 'limited');
    for (let i = 0; i < 3; i++) expect((await login(email, `wrong ${i}`)).status).toBe(401);
    const limited = await login(email, ownerPassword);
    expect(limited.status).toBe(429);
    const body = (await limited.json()) as { detail: string; retry_at: string };
    expect(body.detail).toMatch(/^too many failed sign-ins: try again after \d{4}-\d\d-\d\dT/);
    expect(new Date(body.retry_at).getTime()).toBeGreaterThan(Date.now());
    // RFC 9110: the wait in whole seconds, matching the body's instant.
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(Math.abs(Date.now() + retryAfter * 1000 - new Date(body.retry_at).getTime())).toBeLessThan(2_000);
  });

  it("holds back guesses of an email from one address only: its owner's right password from another address signs in", async () => {
    const email = `held-${setup}@example.com`;
    await api.control.accounts.createOwner(email, ownerPassword, 'held');
    // The limit counts per email and address; the HTTP tests all come from 127.0.0.1.
    for (let i = 0; i < 10; i++) expect([401, 429]).toContain((await login(email, `wrong ${i}`)).status);
    const here = await login(email, ownerPassword);
    expect(here.status).toBe(429);
    expect(Number(here.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Linux answers for all of 127.0.0.0/8: a second client address on the same machine.
    const elsewhere = await loginFrom('127.0.0.2', email, ownerPassword);
    expect(elsewhere.status).toBe(200);
  });

  it('counts a burst of concurrent guesses: no more than the limit get a password check', async () => {
    const email = `burst-${setup}@example.com`;
    await api.control.accounts.createOwner(email, ownerPassword, 'burst');
    const statuses = await Promise.all(Array.from({ length: 20 }, (_, i) => login(email, `guess ${i}`).then((r) => r.status)));
    expect(statuses.filter((s) => s === 401)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(17);
    expect((await login(email, ownerPassword)).status).toBe(429);
  });

  it('does not count successful sign-ins as failures', async () => {
    const email = `regular-${setup}@example.com`;
    await api.control.accounts.createOwner(email, ownerPassword, 'regular');
    for (let i = 0; i < 6; i++) expect((await login(email, ownerPassword)).status).toBe(200);
  });

  it('refuses an expired session', async () => {
    const { token } = (await (await login(ownerEmail, ownerPassword)).json()) as { token: string };
    await sql`update control.sessions set expires_at = now() - interval '1 second'`.execute(api.control.database.db);
    const res = await call('/api/me', { token });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ detail: 'the session has expired: sign in again' });
  });

  it('creates and lists projects in an org the account belongs to, and hides other orgs', async () => {
    const { token } = (await (await login(ownerEmail, ownerPassword)).json()) as { token: string };
    const orgId = ((await (await call('/api/me', { token })).json()) as { orgs: { id: string }[] }).orgs[0]!.id;
    const created = await call(`/api/orgs/${orgId}/projects`, { method: 'POST', token, body: JSON.stringify({ name: 'Support bot' }) });
    expect(created.status).toBe(201);
    const project = (await created.json()) as { id: string; tenant_id: string; name: string; org_id: string };
    expect(project).toMatchObject({ name: 'Support bot', org_id: orgId });
    expect(project.tenant_id).not.toBe(project.id);
    const list = (await (await call(`/api/orgs/${orgId}/projects`, { token })).json()) as { projects: { id: string }[] };
    expect(list.projects.map((p) => p.id)).toContain(project.id);

    const other = await api.control.accounts.createOwner(`other-${setup}@example.com`, ownerPassword, 'other');
    for (const path of [`/api/orgs/${other.orgId}/projects`, `/api/orgs/${crypto.randomUUID()}/projects`]) {
      const hidden = await call(path, { token });
      expect(hidden.status).toBe(404);
      expect(((await hidden.json()) as { detail: string }).detail).toMatch(/^org [0-9a-f-]+ not found$/);
    }
    const bad = await call(`/api/orgs/${orgId}/projects`, { method: 'POST', token, body: JSON.stringify({ name: '  ' }) });
    expect(bad.status).toBe(422);
  });

  it('refuses a project key on org routes with 401 saying why (it is not their credential), and no credential with 401', async () => {
    const path = `/api/orgs/${crypto.randomUUID()}/projects`;
    for (const headers of [{ 'x-api-key': 'pk_live_abc' }, { authorization: 'Bearer pk_live_abc' }] as Record<string, string>[]) {
      const res = await call(path, { headers });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ detail: projectKeyOnOrgRoute });
    }
    expect((await call(path)).status).toBe(401);
    expect((await call('/api/me', { token: 'ses_forged' })).status).toBe(401);
  });
});

describe('first start without an owner configured', () => {
  it('creates the owner with a one-time password kept in the data dir, once', async () => {
    const dataDir = makeTempDir('control-owner');
    try {
      const first = await startTestControl({ AGENTPLANE_DATA_DIR: dataDir });
      expect(first.control.generatedOwner).toEqual({ email: defaultOwnerEmail, passwordFile: `${dataDir}/secrets/owner-password` });
      expect(statSync(`${dataDir}/secrets/owner-password`).mode & 0o777).toBe(0o600);
      const { readFileSync } = await import('node:fs');
      const password = readFileSync(`${dataDir}/secrets/owner-password`, 'utf8').trim();
      const res = await fetch(`${first.url}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: defaultOwnerEmail, password }),
      });
      expect(res.status).toBe(200);
      await first.stop();
      const second = await startTestControl({ AGENTPLANE_DATA_DIR: dataDir });
      expect(second.control.generatedOwner).toBeUndefined();
      await second.stop();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
