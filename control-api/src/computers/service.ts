// A project's computer (docs/decisions/0080): its settings are kept here and pushed in the configuration like any
// change; its sandboxes live on the project's runtime, so each read or action on them goes to the runtime's admin
// surface for the project's tenant, and the runtime's refusals come back as they were (a sandbox of another project
// is one the tenant does not have: 404).
import type { ComputerSettings } from '@agentplane/lib/computer';
import { onProjectRuntime, runtimeQuery, type Provisioner, type TenantCalls } from '../provisioning/provisioner.js';
import type { ProjectService } from '../projects/service.js';

/** What a person may do to one sandbox from here; making one and using it are the data plane's (`/computers/*`). */
export const SANDBOX_ACTIONS = ['pause', 'resume', 'delete'] as const;
export type SandboxAction = (typeof SANDBOX_ACTIONS)[number];

/** The runtime's sandbox states (runtime/src/store/schema.ts), for the list's filter. */
export const SANDBOX_STATES = ['creating', 'running', 'paused', 'stopped', 'failed', 'deleted'] as const;

/** The runtime's Sandbox record, relayed as it came. */
export type RelayedSandbox = Record<string, unknown>;

export interface SandboxPage {
  sandboxes: RelayedSandbox[];
  has_more: boolean;
  next_offset: number | null;
}

/**
 * How long the runtime's answer to whether it has a sandbox host is trusted: a host comes or goes only with a
 * restart of the runtime, and `/capabilities` is read on every page a client shows.
 */
const HOST_ANSWER_TTL_MS = 60_000;
/** Past this many projects remembered, the expired answers are dropped, so the memory stays bounded by the live ones. */
const HOST_ANSWERS_PRUNE_AT = 1_000;

export class ProjectComputers {
  private readonly hostAnswers = new Map<string, { present: boolean; until: number }>();

  constructor(
    private readonly projects: ProjectService,
    private readonly provisioner: Provisioner | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /** The project's settings, the defaults filled where it set none. */
  settings(projectId: string): Promise<ComputerSettings> {
    return this.projects.computerOf(projectId);
  }

  /** Replaces the project's settings, whole; the runtime has them once the push is delivered. */
  setSettings(projectId: string, settings: ComputerSettings): Promise<ComputerSettings> {
    return this.projects.setComputer(projectId, settings);
  }

  /** The sandbox host of the project's runtime (its kind, isolation and enforcement), or null when it has none. */
  async host(projectId: string): Promise<Record<string, unknown> | null> {
    const host = await this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall<Record<string, unknown> | null>(tenantId, 'GET', '/sandbox-host'));
    this.rememberHost(projectId, host !== null);
    return host;
  }

  /** The project's sandboxes, every subject's, newest first. */
  sandboxes(projectId: string, query: { limit: number; offset: number; state?: string | undefined }): Promise<SandboxPage> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall<SandboxPage>(tenantId, 'GET', '/sandboxes', { query: runtimeQuery(query) }));
  }

  /** Pauses, resumes or deletes one of the project's sandboxes: the sandbox after it. */
  act(projectId: string, sandboxId: string, action: SandboxAction): Promise<RelayedSandbox> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall<RelayedSandbox>(tenantId, 'POST', `/sandboxes/${sandboxId}/${action}`));
  }

  /**
   * Whether `enable_computer` would do anything in the project: its runtime has a sandbox host and the project
   * allows at least one sandbox. A runtime that does not answer offers nothing, and is asked again next time.
   */
  async offered(projectId: string): Promise<boolean> {
    if ((await this.projects.computerOf(projectId)).max_sandboxes === 0 || !this.provisioner) return false;
    const known = this.hostAnswers.get(projectId);
    if (known && known.until > this.now()) return known.present;
    try {
      return (await this.host(projectId)) !== null;
    } catch {
      return false;
    }
  }

  private rememberHost(projectId: string, present: boolean): void {
    const now = this.now();
    if (this.hostAnswers.size >= HOST_ANSWERS_PRUNE_AT) {
      for (const [id, answer] of this.hostAnswers) if (answer.until <= now) this.hostAnswers.delete(id);
    }
    this.hostAnswers.set(projectId, { present, until: now + HOST_ANSWER_TTL_MS });
  }

  private onRuntime<T>(projectId: string, call: (runtime: TenantCalls, tenantId: string) => Promise<T>): Promise<T> {
    return onProjectRuntime(this.projects, this.provisioner, projectId, "the project's sandboxes run there", call);
  }
}
