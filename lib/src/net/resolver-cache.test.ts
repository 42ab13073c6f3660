import { describe, expect, it } from 'vitest';
import { cachedResolver } from './resolver-cache.js';
import { checkUrl, type ResolvedAddress } from './url-guard.js';

/** A DNS whose answers the test sets, counting the lookups that reach it. */
function dns(initial: Record<string, string>) {
  const records = { ...initial };
  let lookups = 0;
  let pending: Array<() => void> | undefined;
  const resolve = async (host: string): Promise<ResolvedAddress[]> => {
    lookups++;
    if (pending) await new Promise<void>((release) => pending!.push(release));
    const address = records[host];
    if (!address) throw Object.assign(new Error(`no such host ${host}`), { code: 'ENOTFOUND' });
    return [{ address, family: 4 }];
  };
  return {
    records,
    resolve,
    get lookups() {
      return lookups;
    },
    /** Lookups wait until `release` is called. */
    hold: () => (pending = []),
    release: () => {
      const waiting = pending ?? [];
      pending = undefined;
      for (const go of waiting) go();
    },
  };
}

describe('cachedResolver', () => {
  it('answers from the last answer until it is ttlMs old, then asks again', async () => {
    const server = dns({ 'api.test': '203.0.113.7' });
    let now = 1_000;
    const resolve = cachedResolver({ resolve: server.resolve, ttlMs: 5_000, now: () => now });

    expect(await resolve('api.test')).toEqual([{ address: '203.0.113.7', family: 4 }]);
    server.records['api.test'] = '198.51.100.9';
    now += 4_999;
    expect(await resolve('api.test')).toEqual([{ address: '203.0.113.7', family: 4 }]);
    expect(server.lookups).toBe(1);
    now += 1;
    expect(await resolve('api.test')).toEqual([{ address: '198.51.100.9', family: 4 }]);
    expect(server.lookups).toBe(2);
  });

  it('shares one lookup among requests made while it runs', async () => {
    const server = dns({ 'api.test': '203.0.113.7' });
    const resolve = cachedResolver({ resolve: server.resolve });
    server.hold();
    const answers = Promise.all([resolve('api.test'), resolve('api.test'), resolve('api.test')]);
    server.release();
    expect(await answers).toHaveLength(3);
    expect(server.lookups).toBe(1);
  });

  it('keeps no failure: the next request asks again', async () => {
    const server = dns({});
    const resolve = cachedResolver({ resolve: server.resolve });
    await expect(resolve('new.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    server.records['new.test'] = '203.0.113.7';
    expect(await resolve('new.test')).toEqual([{ address: '203.0.113.7', family: 4 }]);
  });

  it('keeps at most maxHosts answers, dropping the oldest', async () => {
    const server = dns({ 'a.test': '203.0.113.1', 'b.test': '203.0.113.2' });
    const resolve = cachedResolver({ resolve: server.resolve, maxHosts: 1 });
    await resolve('a.test');
    await resolve('b.test');
    await resolve('a.test');
    expect(server.lookups).toBe(3);
  });

  it('leaves the vetting to every request: a kept answer is still refused under a stricter policy', async () => {
    const resolve = cachedResolver({ resolve: dns({ 'model.test': '10.0.0.5' }).resolve });
    expect((await checkUrl('http://model.test/', { allowPrivate: true, allowHttp: true, resolve })).addresses).toEqual([{ address: '10.0.0.5', family: 4 }]);
    await expect(checkUrl('https://model.test/', { allowPrivate: false, allowHttp: false, resolve })).rejects.toMatchObject({
      kind: 'invalid_argument',
      message: expect.stringMatching(/resolves to a private address/),
    });
  });
});
