// What the project's runtime did, read by the project's admins (DESIGN.md flow 3): its scheduled tasks, so far.
// The records live on the runtime; each read goes to its admin surface for the project's tenant, and the runtime's
// refusals come back as they were.
import { AppError } from '@agentplane/lib/errors';
import type { Provisioner, TenantCalls } from '../provisioning/provisioner.js';
import type { ProjectService } from '../projects/service.js';

type Query = Record<string, string | number | undefined>;

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

  private async onRuntime<T>(projectId: string, call: (runtime: TenantCalls, tenantId: string) => Promise<T>): Promise<T> {
    const target = await this.projects.targetOf(projectId);
    if (!this.provisioner) throw new AppError('unavailable', "no runtime is configured (RUNTIME_URL, RUNTIME_ADMIN_KEY): the project's activity is kept there");
    return this.provisioner.withRuntime(target, (runtime) => call(runtime, target.tenantId));
  }
}
