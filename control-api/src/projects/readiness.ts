// A project's readiness report (SPEC.md "Readiness report"): whether a turn can run (`canAnswer`), whether the whole
// checklist is done (`ready`), what to do next, and each step with what it blocks and the call that fixes it. Steps
// read from the control plane's own records and the provisioner; none calls the runtime's end-user surface.
import type { ActivityService, RuntimeReadinessFacts } from '../activity/service.js';
import type { ProvisioningReport } from '../provisioning/status.js';
import type { ProjectService } from './service.js';

export interface ReadinessStep {
  id: string;
  ok: boolean;
  /** An essential step not done makes the project not ready. */
  essential: boolean;
  /** What does not work while this step is not done. */
  blocks: string;
  /** The call that fixes it; null when nothing the customer calls does (the platform or the outbox must). */
  fix: string | null;
  /** What was found, in a sentence. */
  detail: string;
}

export interface ReadinessReport {
  /** Every essential step is done: a turn can run. */
  canAnswer: boolean;
  /** Every step is done. */
  ready: boolean;
  /** The first step not done (essential ones first), in a sentence with its fix; null when ready. */
  next: string | null;
  steps: ReadinessStep[];
}

/** A streak of failed turns this long raises the `turns` step ("a handful", SPEC.md). */
export const FAILED_TURNS_STREAK = 5;

export class ProjectReadiness {
  constructor(
    private readonly projects: ProjectService,
    private readonly provisioning: ProvisioningReport,
    /** The runtime's side (turn health, tasks waiting, documents, unattended work); its steps are left out when it does not answer. */
    private readonly activity?: ActivityService,
  ) {}

  async of(projectId: string): Promise<ReadinessReport> {
    const project = await this.projects.get(projectId);
    const [{ runtime, delivery }, { registeredModels }, defaultModel, hasEmbedding, webhookUrl, facts] = await Promise.all([
      this.provisioning.check({ projectId, tenantId: project.tenant_id }),
      this.projects.ceilingOf(projectId),
      this.projects.defaultModel(projectId),
      this.projects.hasEmbedding(projectId),
      this.projects.webhookUrlOf(projectId),
      this.activity?.readinessFacts(projectId).catch(() => undefined),
    ]);
    const steps: ReadinessStep[] = [
      {
        id: 'runtime',
        ok: runtime.ready,
        essential: true,
        blocks: 'every data-plane call',
        fix: null,
        detail: `${runtime.reason}: ${runtime.message}`,
      },
      {
        id: 'configuration',
        ok: !delivery.failing,
        essential: true,
        blocks: 'tokens signed by keys rotated since, and every configuration change since, on the data plane',
        fix: null,
        detail: delivery.message,
      },
      {
        id: 'provider',
        ok: registeredModels.length > 0,
        essential: true,
        blocks: 'turns: with no provider a turn answers 409 no_provider, or ends with finish_reason no_model when no default model is set',
        fix: `POST /api/projects/${projectId}/providers`,
        detail: registeredModels.length > 0 ? `models registered: ${registeredModels.join(', ')}` : 'no provider is registered',
      },
      {
        id: 'default-model',
        ok: defaultModel !== null && registeredModels.includes(defaultModel),
        essential: true,
        blocks: 'turns that name no model',
        fix: `POST /api/projects/${projectId}/default-model`,
        detail:
          defaultModel === null
            ? 'no default model is set'
            : registeredModels.includes(defaultModel)
              ? `the default model is ${defaultModel}`
              : `the default model ${defaultModel} has no provider: turns answer 409 no_provider until one serves it or another default is set`,
      },
      {
        id: 'origins',
        ok: project.origins.length > 0,
        essential: false,
        blocks: 'browser apps on other origins: they get 403 origin_not_allowed (server-side callers are unaffected)',
        fix: `PUT /api/projects/${projectId}/origins`,
        detail: project.origins.length > 0 ? `browser origins allowed: ${project.origins.join(', ')}` : 'no browser origin is allowed',
      },
      ...(facts ? runtimeSteps(projectId, facts, { hasEmbedding, webhookUrl }) : []),
    ];
    const pending = steps.find((step) => step.essential && !step.ok) ?? steps.find((step) => !step.ok);
    return {
      canAnswer: steps.every((step) => step.ok || !step.essential),
      ready: pending === undefined,
      next: pending ? `${pending.id}: ${pending.detail}${pending.fix ? ` (fix: ${pending.fix})` : ''}` : null,
      steps,
    };
  }
}

/** The steps that read the runtime's facts: an embedding model once there are documents, the webhook URL once there is unattended work, and the two that appear only when something is wrong. */
function runtimeSteps(projectId: string, facts: RuntimeReadinessFacts, project: { hasEmbedding: boolean; webhookUrl: string | null }): ReadinessStep[] {
  const steps: ReadinessStep[] = [
    {
      id: 'embedding-model',
      ok: facts.documents === 0 || project.hasEmbedding,
      essential: false,
      blocks: 'searching documents by meaning: without an embedding model they are searched by their words only',
      fix: `PUT /api/projects/${projectId}/retrieval`,
      detail: facts.documents === 0 ? 'no documents yet' : project.hasEmbedding ? `${facts.documents} document(s), embedded` : `${facts.documents} document(s) and no embedding model`,
    },
    {
      id: 'webhook',
      ok: facts.active_tasks + facts.triggers === 0 || project.webhookUrl !== null,
      essential: false,
      blocks: "turn.stopped and scheduled_task.fired events of unattended work (tasks' callback URLs still get theirs)",
      fix: `PUT /api/projects/${projectId}/webhook`,
      detail:
        project.webhookUrl !== null
          ? `events go to ${project.webhookUrl}`
          : facts.active_tasks + facts.triggers === 0
            ? 'no unattended work yet'
            : `${facts.active_tasks} scheduled task(s) and ${facts.triggers} trigger(s), and no webhook URL`,
    },
  ];
  if (facts.turns.consecutive_errors >= FAILED_TURNS_STREAK) {
    const last = facts.turns.last_error;
    steps.push({
      id: 'turns',
      ok: false,
      essential: false,
      blocks: "the project's end-users: their turns are failing",
      fix: null,
      detail: `the last ${facts.turns.consecutive_errors} turns failed${last ? `; the latest at ${last.at}: ${last.code ? `${last.code}: ` : ''}${last.message}` : ''} (GET /api/projects/${projectId}/turns)`,
    });
  }
  if (facts.tasks_waiting.length > 0) {
    steps.push({
      id: 'tasks-waiting',
      ok: false,
      essential: false,
      blocks: 'the work of scheduled tasks whose last run stopped for a person',
      fix: 'POST /chat on the data plane with the session_id and approval_decisions (or question_answers), with a token for the task\'s subject',
      detail: facts.tasks_waiting
        .map((task) => `task '${task.name}' (${task.task_id}) stopped at ${task.stopped_at} with a question in session ${task.session_id ?? '(none)'}`)
        .join('; '),
    });
  }
  return steps;
}
