// The sandbox host this runtime uses, as its configuration says (docs/decisions/0079).
import { existsSync } from 'node:fs';
import type { Logger } from '@agentplane/lib/logging';
import type { SandboxHost } from './host.js';
import { LocalSandboxHost } from './local/host.js';

export async function createSandboxHost(options: { kind: 'auto' | 'local' | 'none'; root: string; hostUid: number; logger: Logger }): Promise<SandboxHost | undefined> {
  if (options.kind === 'none') return undefined;
  if (options.kind === 'auto' && !existsSync('/usr/bin/bwrap')) {
    options.logger.info('no sandbox host: bubblewrap is not installed (apt-get install bubblewrap), so the computer capability is not offered');
    return undefined;
  }
  return LocalSandboxHost.create({ root: options.root, logger: options.logger, hostUid: options.hostUid });
}
