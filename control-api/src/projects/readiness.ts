// A project's readiness report (SPEC.md "Readiness report"): whether a turn can run (`canAnswer`), whether the whole
// checklist is done (`ready`), what to do next, and each step with what it blocks and the call that fixes it. Steps
// read from the control plane's own records and the provisioner; none calls the runtime's end-user surface.
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

export class ProjectReadiness {
  constructor(
    private readonly projects: ProjectService,
    private readonly provisioning: ProvisioningReport,
  ) {}

  async of(projectId: string): Promise<ReadinessReport> {
    const project = await this.projects.get(projectId);
    const [{ runtime, delivery }, { registeredModels }, defaultModel] = await Promise.all([
      this.provisioning.check({ projectId, tenantId: project.tenant_id }),
      this.projects.ceilingOf(projectId),
      this.projects.defaultModel(projectId),
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
