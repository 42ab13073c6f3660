// Chromium as the agent's browser runs it (docs/decisions/0087): every connection through the egress proxy, which
// applies the SSRF guard per connection. Chromium would otherwise send requests to loopback directly
// (`<-loopback>` takes loopback out of its implicit bypass list), resolve names itself (every name resolves to
// nothing here, so only the proxy's resolution counts), and talk UDP for WebRTC and QUIC outside any proxy (both off).
import { chromium, type Browser, type BrowserServer, type LaunchOptions } from 'playwright-core';
import type { EgressProxy } from '@agentplane/lib/net/egress-proxy';

export interface ChromiumLaunch {
  executablePath: string;
  proxy: Pick<EgressProxy, 'url' | 'username' | 'password'>;
  /** Chromium's own sandbox; off only where the kernel cannot give it (a container without user namespaces). */
  sandbox: boolean;
}

/** The name Chromium knows the proxy by: the only name it can resolve (to the proxy's address). */
const PROXY_NAME = 'egress-proxy.invalid';

export function guardedChromiumArgs(proxyUrl: string): string[] {
  return [
    '--proxy-bypass-list=<-loopback>',
    // Every name and address maps to nothing but the proxy's own name: a request that skipped the proxy goes nowhere,
    // 127.0.0.1 included (the proxy is not reached by its address).
    `--host-resolver-rules=MAP ${PROXY_NAME} ${new URL(proxyUrl).hostname}, MAP * ~NOTFOUND`,
    // One page's script cannot take more than this of a renderer's heap.
    '--js-flags=--max-old-space-size=512',
    '--disable-quic',
    '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
    '--webrtc-ip-handling-policy=disable_non_proxied_udp',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-domain-reliability',
    '--disable-features=DnsOverHttps,NetworkPrediction,PrivateNetworkAccessSendPreflights',
    '--no-pings',
    '--no-first-run',
    '--disable-gpu',
    '--mute-audio',
  ];
}

/** Playwright's launch options for Chromium run this way; the browser Pod's server launches with the same. */
function guardedLaunchOptions(launch: ChromiumLaunch): LaunchOptions {
  return {
    executablePath: launch.executablePath,
    headless: true,
    chromiumSandbox: launch.sandbox,
    proxy: { server: `http://${PROXY_NAME}:${new URL(launch.proxy.url).port}`, username: launch.proxy.username, password: launch.proxy.password, bypass: '<-loopback>' },
    args: guardedChromiumArgs(launch.proxy.url),
  };
}

export function launchGuardedChromium(launch: ChromiumLaunch): Promise<Browser> {
  return chromium.launch(guardedLaunchOptions(launch));
}

/**
 * Chromium run this way behind Playwright's browser server (the browser Pod, docs/decisions/0092): clients connect
 * with `chromium.connect` at `ws://host:port/<wsPath>`, and the path, a secret, is the only credential it knows.
 */
export function launchGuardedChromiumServer(launch: ChromiumLaunch, serve: { host: string; port: number; wsPath: string }): Promise<BrowserServer> {
  return chromium.launchServer({ ...guardedLaunchOptions(launch), host: serve.host, port: serve.port, wsPath: `/${serve.wsPath}` });
}
