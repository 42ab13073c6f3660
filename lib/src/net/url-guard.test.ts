import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { checkUrl, guardedAgent, guardedLookup, type Resolver, type UrlPolicy } from './url-guard.js';

const noDns: Resolver = async (host) => {
  throw new Error(`unexpected lookup of ${host}`);
};
const strict: UrlPolicy = { allowPrivate: false, allowHttp: true, resolve: noDns };
const dev: UrlPolicy = { allowPrivate: true, allowHttp: true, resolve: noDns };

const answers =
  (table: Record<string, string[]>): Resolver =>
  async (host) => (table[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

async function refusal(url: string, policy: UrlPolicy): Promise<AppError> {
  const err = await checkUrl(url, policy, 'base_url').then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `${url} should be refused`).toBeInstanceOf(AppError);
  expect((err as AppError).kind).toBe('invalid_argument');
  return err as AppError;
}

describe('checkUrl', () => {
  it.each([
    // loopback, in every spelling a URL parser or resolver accepts
    ['http://127.0.0.1/', /loopback address \(127\.0\.0\.1\)/],
    ['http://2130706433/', /loopback/],
    ['http://0177.0.0.1/', /loopback/],
    ['http://0x7f.1/', /loopback/],
    ['http://127.1/', /loopback/],
    ['http://127.0.0.1./', /loopback/],
    ['http://[::1]/', /loopback/],
    ['http://[::ffff:127.0.0.1]/', /loopback/],
    ['http://[::ffff:7f00:1]/', /loopback/],
    ['http://[::ffff:0:7f00:1]/', /loopback/],
    ['http://[::127.0.0.1]/', /loopback/],
    ['http://[64:ff9b::7f00:1]/', /loopback/],
    // private, CGNAT, unique local
    ['http://10.0.0.5/', /private address \(10\.0\.0\.5\)/],
    ['http://172.16.0.1/', /private/],
    ['http://172.31.255.255/', /private/],
    ['http://192.168.1.1/', /private/],
    ['http://0xc0a80101/', /private/],
    ['http://[::ffff:10.0.0.5]/', /private/],
    ['http://100.64.0.1/', /carrier-grade NAT/],
    ['http://[fc00::1]/', /unique local/],
    ['http://[fd12:3456::1]/', /unique local/],
    // link-local and cloud metadata
    ['http://169.254.169.254/latest/meta-data/', /cloud metadata address/],
    ['http://2852039166/', /cloud metadata/],
    ['http://[::ffff:169.254.169.254]/', /cloud metadata/],
    ['http://[fd00:ec2::254]/', /cloud metadata/],
    ['http://169.254.170.2/', /link-local/],
    ['http://[fe80::1]/', /link-local/],
    // unspecified, multicast, broadcast, reserved, documentation, tunnels
    ['http://0.0.0.0/', /unspecified/],
    ['http://0/', /unspecified/],
    ['http://[::]/', /unspecified/],
    ['http://224.0.0.1/', /multicast/],
    ['http://[ff02::1]/', /multicast/],
    ['http://255.255.255.255/', /broadcast/],
    ['http://240.0.0.1/', /reserved/],
    ['http://192.0.2.1/', /reserved or documentation/],
    ['http://198.51.100.7/', /documentation/],
    ['http://203.0.113.9/', /documentation/],
    ['http://[2001:db8::1]/', /documentation/],
    ['http://[2002:7f00:1::]/', /special-purpose/],
    ['http://[2001::1]/', /special-purpose/],
    // names
    ['http://localhost/', /local machine \(localhost\)/],
    ['http://LOCALHOST./', /local machine/],
    ['http://api.localhost:8080/', /local machine/],
    ['http://metadata.google.internal/computeMetadata/v1/', /cloud metadata host/],
    // credentials, schemes, garbage
    ['https://user:secret@api.example.com/', /user name or password/],
    ['https://user@api.example.com/', /user name or password/],
    ['file:///etc/passwd', /must use https or http, not file/],
    ['gopher://127.0.0.1:6379/_INFO', /not gopher/],
    ['ftp://ftp.example.com/', /not ftp/],
    ['javascript:alert(1)', /not javascript/],
    ['data:text/plain,hi', /not data/],
    ['/v1/chat', /not a valid absolute URL/],
    ['not a url', /not a valid absolute URL/],
  ])('refuses %s', async (url, message) => {
    expect((await refusal(url, strict)).message).toMatch(message);
  });

  it('says what to do about an address local development may use', async () => {
    expect((await refusal('http://10.0.0.5:8000/v1', strict)).message).toBe(
      'base_url points to a private address (10.0.0.5); set AGENTPLANE_ALLOW_PRIVATE_URLS=true for local development',
    );
    expect((await refusal('http://169.254.169.254/', strict)).message).toBe(
      'base_url points to a cloud metadata address (169.254.169.254), which is never allowed',
    );
  });

  it('refuses plain http unless the policy allows it', async () => {
    expect((await refusal('http://93.184.216.34/', { ...strict, allowHttp: false })).message).toBe(
      'base_url must use https, not http',
    );
  });

  it.each([
    'https://93.184.216.34/v1',
    'https://1572395042/',
    'https://[2606:4700:4700::1111]/',
    'https://[::ffff:93.184.216.34]/',
    'https://[64:ff9b::5db8:d822]/',
  ])('allows the public address %s without a lookup', async (url) => {
    const { addresses } = await checkUrl(url, strict);
    expect(addresses).toHaveLength(1);
  });

  it('allows a name only when every address it resolves to is public', async () => {
    const resolve = answers({
      'api.example.test': ['93.184.216.34', '2606:2800:220:1::1'],
      'mixed.example.test': ['93.184.216.34', '10.0.0.5'],
      'mapped.example.test': ['::ffff:127.0.0.1'],
      'loop.example.test': ['127.0.0.1'],
    });
    const policy = { ...strict, resolve };
    const checked = await checkUrl('https://api.example.test/v1', policy);
    expect(checked.url.hostname).toBe('api.example.test');
    expect(checked.addresses.map((a) => a.address)).toEqual(['93.184.216.34', '2606:2800:220:1::1']);

    expect((await refusal('https://mixed.example.test/', policy)).message).toBe(
      'base_url host mixed.example.test resolves to a private address; set AGENTPLANE_ALLOW_PRIVATE_URLS=true for local development',
    );
    expect((await refusal('https://mapped.example.test/', policy)).message).toMatch(/resolves to a loopback address/);
    expect((await refusal('https://loop.example.test/', policy)).message).not.toContain('127.0.0.1');
    expect((await refusal('https://nowhere.example.test/', policy)).message).toMatch(/does not resolve/);
  });

  it('turns an unknown name into a refusal and a resolver outage into a retryable error', async () => {
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
    const flaky = Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' });
    await expect(checkUrl('https://x.test/', { ...strict, resolve: () => Promise.reject(notFound) })).rejects.toMatchObject({
      kind: 'invalid_argument',
      message: 'url host x.test could not be resolved',
    });
    await expect(checkUrl('https://x.test/', { ...strict, resolve: () => Promise.reject(flaky) })).rejects.toMatchObject({
      kind: 'unavailable',
    });
  });

  it('with allowPrivate, allows local addresses and localhost but never metadata, link-local or unspecified', async () => {
    for (const url of ['http://127.0.0.1:8000/', 'http://10.0.0.5/', 'http://[fd12::1]/', 'http://100.64.0.1/']) {
      await expect(checkUrl(url, dev)).resolves.toBeDefined();
    }
    const { addresses } = await checkUrl('http://localhost:1/', { allowPrivate: true, allowHttp: true });
    expect(addresses.length).toBeGreaterThan(0);
    for (const url of [
      'http://169.254.169.254/',
      'http://[::ffff:a9fe:a9fe]/',
      'http://[fd00:ec2::254]/',
      'http://[fd00:ec2::23]/',
      'http://100.100.100.200/',
      'http://169.254.170.2/',
      'http://metadata.google.internal/',
      'http://0.0.0.0/',
    ]) {
      expect((await refusal(url, dev)).message).toMatch(/never allowed/);
    }
  });
});

describe('guardedLookup', () => {
  const lookupOnce = (lookup: ReturnType<typeof guardedLookup>, host: string, all: boolean) =>
    new Promise<unknown>((resolve, reject) =>
      lookup(host, { all }, (err, address) => (err ? reject(err) : resolve(address))),
    );

  it('vets every resolution, so a rebound second answer is refused', async () => {
    let calls = 0;
    const resolve: Resolver = async () => [{ address: calls++ === 0 ? '93.184.216.34' : '169.254.169.254', family: 4 }];
    const lookup = guardedLookup({ ...strict, resolve });
    await expect(lookupOnce(lookup, 'rebind.test', false)).resolves.toBe('93.184.216.34');
    await expect(lookupOnce(lookup, 'rebind.test', true)).rejects.toMatchObject({ kind: 'invalid_argument' });
  });
});

describe('guardedAgent', () => {
  let server: http.Server;
  let port: number;
  beforeAll(async () => {
    server = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  const get = (host: string, agent: http.Agent) =>
    new Promise<string>((resolve, reject) =>
      http.get({ host, port, agent }, (res) => res.setEncoding('utf8').on('data', resolve)).on('error', reject),
    );

  it('refuses a connection to a name or a literal the policy refuses', async () => {
    const resolve = answers({ 'loop.test': ['127.0.0.1'] });
    const agent = guardedAgent({ ...strict, resolve }, 'http:');
    await expect(get('loop.test', agent)).rejects.toThrow(/resolves to a loopback address/);
    await expect(get('127.0.0.1', agent)).rejects.toThrow(/points to a loopback address/);
    agent.destroy();
  });

  it('connects where the policy allows, through its own resolver', async () => {
    const agent = guardedAgent({ ...dev, resolve: answers({ 'model.test': ['127.0.0.1'] }) }, 'http:');
    await expect(get('model.test', agent)).resolves.toBe('ok');
    await expect(get('127.0.0.1', agent)).resolves.toBe('ok');
    agent.destroy();
  });
});
