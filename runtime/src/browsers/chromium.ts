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

/** What of this process's environment Chromium may see: its keys, URLs and tokens are none of a page's business. */
const BROWSER_ENVIRONMENT = ['PATH', 'HOME', 'LANG', 'LANGUAGE', 'LC_ALL', 'TZ', 'TMPDIR', 'XDG_CONFIG_HOME', 'XDG_CACHE_HOME', 'FONTCONFIG_PATH', 'FONTCONFIG_FILE'];

export function browserEnvironment(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const name of BROWSER_ENVIRONMENT) if (env[name] !== undefined) kept[name] = env[name];
  return kept;
}

/** Playwright's launch options for Chromium run this way; the browser Pod's server launches with the same. */
function guardedLaunchOptions(launch: ChromiumLaunch): LaunchOptions {
  return {
    executablePath: launch.executablePath,
    // A renderer without Chromium's own sandbox can read its process's environment (/proc/self/environ).
    env: browserEnvironment(),
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
 * Chromium run this way behind Playwright's browser server (the browser Pod, docs/decisions/0092), on loopback only
 * (`port` 0 picks one): Playwright's server tells its path to whoever asks (`GET /json`), so the Pod's port is the
 * token-checking gate in front of it (server/gate.ts).
 */
export function launchGuardedChromiumServer(launch: ChromiumLaunch, port: number): Promise<BrowserServer> {
  return chromium.launchServer({ ...guardedLaunchOptions(launch), host: '127.0.0.1', port });
}
