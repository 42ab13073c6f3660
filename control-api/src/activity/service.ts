// What the project's runtime did, read by the project's admins (DESIGN.md flow 3): its conversations, scheduled
// tasks, turn health, and the facts the readiness report's steps read.
// The records live on the runtime; each read goes to its admin surface for the project's tenant, and the runtime's
// refusals come back as they were.
import { AppError } from '@agentplane/lib/errors';
import type { Provisioner, TenantCalls } from '../provisioning/provisioner.js';
import type { ProjectService } from '../projects/service.js';

type Query = Record<string, string | number | undefined>;

/** The runtime's `GET /tenants/{id}/readiness`. */
export interface RuntimeReadinessFacts {
  turns: { consecutive_errors: number; last_error: { code: string | null; message: string; at: string } | null };
  tasks_waiting: { task_id: string; name: string; stopped_at: string; session_id: string | null }[];
  documents: number;
  active_tasks: number;
  triggers: number;
}

const queryOf = (query: Query): Record<string, string> =>
  Object.fromEntries(Object.entries(query).flatMap(([name, value]) => (value === undefined ? [] : [[name, String(value)]])));

export class ActivityService {
  constructor(
    private readonly projects: ProjectService,
    private readonly provisioner: Provisioner | undefined,
  ) {}

  tasks(projectId: string, query: Query): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/tasks', { query: queryOf(query) }));
  }

  sessions(projectId: string, query: Query): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/sessions', { query: queryOf(query) }));
  }

  sessionMessages(projectId: string, sessionId: string, query: Query): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', `/sessions/${sessionId}/messages`, { query: queryOf(query) }));
  }

  context(projectId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/context'));
  }

  turns(projectId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/turns'));
  }

  /** What the readiness report reads from the runtime: turn health, tasks waiting for a person, documents, unattended work. */
  readinessFacts(projectId: string): Promise<RuntimeReadinessFacts> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall<RuntimeReadinessFacts>(tenantId, 'GET', '/readiness'));
  }

  private async onRuntime<T>(projectId: string, call: (runtime: TenantCalls, tenantId: string) => Promise<T>): Promise<T> {
    const target = await this.projects.targetOf(projectId);
    if (!this.provisioner) throw new AppError('unavailable', "no runtime is configured (RUNTIME_URL, RUNTIME_ADMIN_KEY): the project's activity is kept there");
    return this.provisioner.withRuntime(target, (runtime) => call(runtime, target.tenantId));
  }
}
