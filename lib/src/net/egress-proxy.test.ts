// The egress proxy spoken to as Chromium speaks to it (CONNECT tunnels, absolute-URI requests), without a browser:
// its credential, the service's own ports in every spelling of a local address, and a destination that answers
// what is not HTTP (a status Node refuses to write must not take the process down).
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvReader } from '../config.js';
import { readAllowedDestinations, startEgressProxy, type EgressProxy } from './egress-proxy.js';

const auth = (proxy: EgressProxy) => `Basic ${Buffer.from(`${proxy.username}:${proxy.password}`).toString('base64')}`;

/** The first line a CONNECT through the proxy is answered with. */
function connectThrough(proxy: EgressProxy, target: string, credential = auth(proxy)): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(new URL(proxy.url).port), '127.0.0.1', () => {
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: ${credential}\r\n\r\n`);
    });
    socket.once('data', (data) => {
      resolve(data.toString().split('\r\n')[0]!);
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

/** A plain-HTTP request through the proxy: its status. */
function getThrough(proxy: EgressProxy, url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port: Number(new URL(proxy.url).port), method: 'GET', path: url, headers: { 'proxy-authorization': auth(proxy) } });
    request.once('response', (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.once('error', reject);
    request.end();
  });
}

describe('the egress proxy', () => {
  let own: net.Server;
  let ownPort: number;
  let broken: net.Server;
  let brokenPort: number;
  let proxy: EgressProxy;

  beforeAll(async () => {
    own = net.createServer((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'));
    await new Promise<void>((resolve) => own.listen(0, '127.0.0.1', resolve));
    ownPort = (own.address() as AddressInfo).port;
    // Answers every request with status 000, which Node's client takes and its server refuses to write.
    broken = net.createServer((socket) => socket.once('data', () => socket.end('HTTP/1.1 000 OK\r\nContent-Length: 0\r\n\r\n')));
    await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', resolve));
    brokenPort = (broken.address() as AddressInfo).port;
    // Private addresses allowed (as in development), so only the own-ports rule stands between a page and the service.
    proxy = await startEgressProxy({ policy: { allowPrivate: true, allowHttp: true }, ownPorts: [ownPort] });
  });
  afterAll(async () => {
    await proxy?.close();
    own?.close();
    broken?.close();
  });

  it('serves only the client with its credential', async () => {
    expect(await connectThrough(proxy, `127.0.0.1:${brokenPort}`, 'Basic bm9ib2R5Om5vdGhpbmc=')).toMatch(/^HTTP\/1\.1 407/);
  });

  it("refuses the service's own port in every spelling of a local address", async () => {
    for (const target of [`127.0.0.1:${ownPort}`, `localhost:${ownPort}`, `[::ffff:127.0.0.1]:${ownPort}`, `[::ffff:7f00:1]:${ownPort}`, `2130706433:${ownPort}`, `127.1:${ownPort}`]) {
      expect(await connectThrough(proxy, target), target).toMatch(/^HTTP\/1\.1 (403|502)/);
    }
    expect(await getThrough(proxy, `http://[::ffff:7f00:1]:${ownPort}/`)).toBe(403);
  });

  it('answers 502 for a destination that answers what is not HTTP, and goes on serving', async () => {
    expect(await getThrough(proxy, `http://127.0.0.1:${brokenPort}/`)).toBe(502);
    expect(await connectThrough(proxy, `127.0.0.1:${brokenPort}`)).toBe('HTTP/1.1 200 Connection Established');
  });
});

describe('BROWSER_ALLOWED_DESTINATIONS', () => {
  const read = (value: string) => {
    const reader = new EnvReader({ BROWSER_ALLOWED_DESTINATIONS: value });
    const destinations = readAllowedDestinations(reader);
    try {
      reader.done();
      return destinations;
    } catch (error) {
      return (error as Error).message;
    }
  };

  it('takes host:port and [ipv6]:port entries, and nothing else', () => {
    expect(read(' wiki.corp.example:443, 10.1.2.3:8080 ,[fd00::1]:8443,')).toEqual(['wiki.corp.example:443', '10.1.2.3:8080', '[fd00::1]:8443']);
    for (const bad of ['wiki.corp.example', '10.1.2.3:0', '10.1.2.3:65536', '10.1.2.3:99999', 'http://x:80', '10.0.0.0/8:80']) {
      expect(read(bad), bad).toContain('a port from 1 to 65535');
    }
  });
});
