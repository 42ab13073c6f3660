// Chromium as the agent's browser runs it (docs/decisions/0087): every connection through the egress proxy, which
// applies the SSRF guard per connection. Chromium would otherwise send requests to loopback directly
// (`<-loopback>` takes loopback out of its implicit bypass list), resolve names itself (every name resolves to
// nothing here, so only the proxy's resolution counts), and talk UDP for WebRTC and QUIC outside any proxy (both off).
import { chromium, type Browser } from 'playwright-core';
import type { EgressProxy } from '@agentplane/lib/net/egress-proxy';

export interface ChromiumLaunch {
  executablePath: string;
  proxy: Pick<EgressProxy, 'url' | 'username' | 'password'>;
  /** Chromium's own sandbox; off only where the kernel cannot give it (a container without user namespaces). */
  sandbox: boolean;
}

export function guardedChromiumArgs(proxyUrl: string): string[] {
  return [
    '--proxy-bypass-list=<-loopback>',
    // Every name and address but the proxy's own maps to nothing: a request that skipped the proxy goes nowhere.
    `--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE ${new URL(proxyUrl).hostname}`,
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

export function launchGuardedChromium(launch: ChromiumLaunch): Promise<Browser> {
  return chromium.launch({
    executablePath: launch.executablePath,
    headless: true,
    chromiumSandbox: launch.sandbox,
    proxy: { server: launch.proxy.url, username: launch.proxy.username, password: launch.proxy.password, bypass: '<-loopback>' },
    args: guardedChromiumArgs(launch.proxy.url),
  });
}
