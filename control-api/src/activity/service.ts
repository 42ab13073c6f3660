// What the project's runtime did, read by the project's admins (DESIGN.md flow 3): its conversations, scheduled
// tasks, turn health, and the facts the readiness report's steps read.
// The records live on the runtime; each read goes to its admin surface for the project's tenant, and the runtime's
// refusals come back as they were.
import { onProjectRuntime, runtimeQuery, type Provisioner, type TenantCalls } from '../provisioning/provisioner.js';
import type { ProjectService } from '../projects/service.js';

type Query = Record<string, string | number | undefined>;

interface ProjectUsage {
  cost_usd: number | null;
  unpriced_calls: number;
  requests: number;
  model_calls: number;
  input_tokens: number;
  output_tokens: number;
}

export interface OrgCosts {
  window: string;
  /** The priced projects' spend summed; null when none had a price. */
  cost_usd: number | null;
  unpriced_calls: number;
  /** Some project's runtime did not answer: the totals leave it out. */
  incomplete: boolean;
  projects: (ProjectUsage & { project_id: string; name: string; error: string | null })[];
}

/** The runtime's `GET /tenants/{id}/readiness`. */
export interface RuntimeReadinessFacts {
  turns: { consecutive_errors: number; last_error: { code: string | null; message: string; at: string } | null };
  tasks_waiting: { task_id: string; name: string; stopped_at: string; session_id: string | null }[];
  documents: number;
  active_tasks: number;
  triggers: number;
}

export class ActivityService {
  constructor(
    private readonly projects: ProjectService,
    private readonly provisioner: Provisioner | undefined,
  ) {}

  tasks(projectId: string, query: Query): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/tasks', { query: runtimeQuery(query) }));
  }

  sessions(projectId: string, query: Query): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/sessions', { query: runtimeQuery(query) }));
  }

  sessionMessages(projectId: string, sessionId: string, query: Query): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', `/sessions/${sessionId}/messages`, { query: runtimeQuery(query) }));
  }

  usage(projectId: string, window: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/usage', { query: { window } }));
  }

  observability(projectId: string, window: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/observability', { query: { window } }));
  }

  /**
   * An organization's spend over a window: each project's usage, read from its runtime, and the sum. A project whose
   * runtime does not answer is listed with why, and counted in no total.
   */
  async orgCosts(projects: { id: string; name: string }[], window: string): Promise<OrgCosts> {
    const rows = await Promise.all(
      projects.map(async (project) => {
        try {
          const usage = (await this.usage(project.id, window)) as ProjectUsage;
          return { project_id: project.id, name: project.name, cost_usd: usage.cost_usd, unpriced_calls: usage.unpriced_calls, requests: usage.requests, model_calls: usage.model_calls, input_tokens: usage.input_tokens, output_tokens: usage.output_tokens, error: null };
        } catch (error) {
          return { project_id: project.id, name: project.name, cost_usd: null, unpriced_calls: 0, requests: 0, model_calls: 0, input_tokens: 0, output_tokens: 0, error: error instanceof Error ? error.message : String(error) };
        }
      }),
    );
    const priced = rows.filter((row) => row.cost_usd !== null);
    return {
      window,
      cost_usd: priced.length === 0 ? null : priced.reduce((sum, row) => sum + row.cost_usd!, 0),
      unpriced_calls: rows.reduce((sum, row) => sum + row.unpriced_calls, 0),
      incomplete: rows.some((row) => row.error !== null),
      projects: rows,
    };
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

  private onRuntime<T>(projectId: string, call: (runtime: TenantCalls, tenantId: string) => Promise<T>): Promise<T> {
    return onProjectRuntime(this.projects, this.provisioner, projectId, "the project's activity is kept there", call);
  }
}
