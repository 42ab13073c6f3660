// Telling the person who started a fresh install how to sign in as its first owner.
import { readFileSync } from 'node:fs';
import type { Logger } from '@agentplane/lib/logging';
import { announceGeneratedSecret } from '@agentplane/lib/program';

export function announceGeneratedOwner(logger: Logger, owner: { email: string; passwordFile: string }): void {
  const password = readFileSync(owner.passwordFile, 'utf8').trim();
  announceGeneratedSecret(logger, `a one-time password for the first owner, ${owner.email}`, owner.passwordFile, password);
}
