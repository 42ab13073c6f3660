// People and their sign-in: accounts with scrypt-hashed passwords, orgs they belong to, and opaque session
// tokens (stored only as a hash) that expire and can be revoked. Failed sign-ins are rate limited.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { AppError, unauthenticated } from '@agentplane/lib/errors';
import type { Counters } from '@agentplane/lib/events/port';
import type { ControlSchema } from '../store/schema.js';
import { decoyHash, hashPassword, verifyPassword } from './passwords.js';

export interface Account {
  id: string;
  email: string;
  created_at: string;
}

export interface OrgMembership {
  id: string;
  name: string;
  role: 'owner' | 'member';
}

export interface SignInLimits {
  /** Failed sign-ins of one email from one client address before that pair waits (see `signIn`). */
  maxFailures: number;
  /** Failed sign-ins allowed per client address in one window (guessing across many emails). */
  maxFailuresPerAddress: number;
  windowSeconds: number;
  /** The first wait of a locked pair; each further failure doubles it, up to the window. */
  lockSeconds: number;
}

export interface SessionOptions {
  ttlSeconds: number;
}

const sessionPrefix = 'ses_';

const hashToken = (token: string) => createHash('sha256').update(token).digest('base64url');

export const normaliseEmail = (email: string) => email.trim().toLowerCase();

export class AccountService {
  constructor(
    private readonly db: Kysely<ControlSchema>,
    private readonly counters: Counters,
    private readonly limits: SignInLimits,
    private readonly sessions: SessionOptions,
  ) {}

  async hasAccounts(): Promise<boolean> {
    return Boolean(await this.db.selectFrom('accounts').select('id').limit(1).executeTakeFirst());
  }

  /** Creates an account and an org it owns, in one transaction. */
  async createOwner(email: string, password: string, orgName: string): Promise<{ account: Account; orgId: string }> {
    const passwordHash = await hashPassword(password);
    return this.db.transaction().execute(async (trx) => {
      const account = await trx
        .insertInto('accounts')
        .values({ id: randomUUID(), email: normaliseEmail(email), password_hash: passwordHash })
        .returningAll()
        .executeTakeFirstOrThrow();
      const orgId = randomUUID();
      await trx.insertInto('orgs').values({ id: orgId, name: orgName }).execute();
      await trx.insertInto('org_members').values({ org_id: orgId, account_id: account.id, role: 'owner' }).execute();
      return { account: presentAccount(account), orgId };
    });
  }

  /**
   * Signs in. A wrong password and an unknown email answer alike, in about the same time (the unknown email
   * is checked against a decoy hash).
   *
   * Guessing is throttled per email *and client address*: after `maxFailures` failures of one email from one
   * address, that pair waits `lockSeconds`, then gets one more try per wait, each failure doubling the wait up to
   * the window; every attempt while it waits answers 429 with the time, the right password included. The same
   * email from another address is not held back, so nobody who merely knows an email can lock its owner out. An
   * address that fails across many emails is stopped at `maxFailuresPerAddress` per window.
   */
  async signIn(emailInput: string, password: string, clientAddress: string): Promise<{ token: string; expires_at: string; account: Account }> {
    const email = normaliseEmail(emailInput);
    const pair = `${email}\n${clientAddress}`;
    const keys = { failures: `signin:pair:${pair}`, lock: `signin:lock:${pair}`, strikes: `signin:strikes:${pair}`, address: `signin:addr:${clientAddress}` };
    const { windowSeconds } = this.limits;
    const lock = await this.counters.get(keys.lock);
    if (lock.value > 0 && lock.resetAt) throw tooManyFailures(lock.resetAt);
    // Each attempt is counted atomically *before* the slow password check: checking first and counting after
    // would let a burst of concurrent guesses all pass the check before any of them is counted.
    const [failures, address] = await Promise.all([
      this.counters.increment(keys.failures, 1, windowSeconds),
      this.counters.increment(keys.address, 1, windowSeconds),
    ]);
    if (address.value > this.limits.maxFailuresPerAddress) throw tooManyFailures(address.resetAt);
    if (failures.value > this.limits.maxFailures) {
      // Beyond the limit in one burst, before the lock of the attempt that reached it was set: not checked.
      await this.counters.increment(keys.failures, -1, windowSeconds);
      throw tooManyFailures(new Date(Date.now() + this.limits.lockSeconds * 1000));
    }
    const account = await this.db.selectFrom('accounts').selectAll().where('email', '=', email).executeTakeFirst();
    const valid = await verifyPassword(password, account?.password_hash ?? (await decoyHash()));
    if (!account || !valid) {
      if (failures.value >= this.limits.maxFailures) {
        const strikes = await this.counters.increment(keys.strikes, 1, windowSeconds);
        const wait = Math.min(windowSeconds, this.limits.lockSeconds * 2 ** (strikes.value - 1));
        await this.counters.increment(keys.lock, 1, wait);
        // After the wait, one more try: it is the limit's again, and a failure locks for twice as long.
        await this.counters.increment(keys.failures, -1, windowSeconds);
      }
      throw unauthenticated('invalid email or password');
    }
    // A success was not a failure: give its counts back, so people signing in often are never held back.
    const strikes = await this.counters.get(keys.strikes);
    await Promise.all([
      this.counters.increment(keys.failures, -failures.value, windowSeconds),
      this.counters.increment(keys.address, -1, windowSeconds),
      ...(strikes.value > 0 ? [this.counters.increment(keys.strikes, -strikes.value, windowSeconds)] : []),
    ]);
    const token = `${sessionPrefix}${randomBytes(32).toString('base64url')}`;
    const expiresAt = new Date(Date.now() + this.sessions.ttlSeconds * 1000);
    await this.db
      .insertInto('sessions')
      .values({ id: randomUUID(), token_hash: hashToken(token), account_id: account.id, expires_at: expiresAt })
      .execute();
    return { token, expires_at: expiresAt.toISOString(), account: presentAccount(account) };
  }

  /** The account behind a live session token; 401 for anything else. */
  async authenticate(token: string): Promise<Account & { sessionTokenHash: string }> {
    const row = await this.db
      .selectFrom('sessions')
      .innerJoin('accounts', 'accounts.id', 'sessions.account_id')
      .select(['accounts.id', 'accounts.email', 'accounts.created_at', 'sessions.token_hash', 'sessions.expires_at', 'sessions.revoked_at'])
      .where('sessions.token_hash', '=', hashToken(token))
      .executeTakeFirst();
    if (!row || row.revoked_at !== null) throw unauthenticated('not signed in: the session token is unknown or was signed out');
    if (row.expires_at.getTime() <= Date.now()) throw unauthenticated('the session has expired: sign in again');
    return { id: row.id, email: row.email, created_at: row.created_at.toISOString(), sessionTokenHash: row.token_hash };
  }

  async signOut(sessionTokenHash: string): Promise<void> {
    await this.db.updateTable('sessions').set({ revoked_at: new Date() }).where('token_hash', '=', sessionTokenHash).where('revoked_at', 'is', null).execute();
  }

  async orgsOf(accountId: string): Promise<OrgMembership[]> {
    const rows = await this.db
      .selectFrom('org_members')
      .innerJoin('orgs', 'orgs.id', 'org_members.org_id')
      .select(['orgs.id', 'orgs.name', 'org_members.role'])
      .where('org_members.account_id', '=', accountId)
      .orderBy('orgs.created_at')
      .execute();
    return rows;
  }
}

function presentAccount(row: { id: string; email: string; created_at: Date }): Account {
  return { id: row.id, email: row.email, created_at: row.created_at.toISOString() };
}

function tooManyFailures(resetAt: Date): AppError {
  return new AppError('rate_limited', `too many failed sign-ins: try again after ${resetAt.toISOString()}`, {
    extra: { retry_at: resetAt.toISOString() },
    retryAt: resetAt,
  });
}
