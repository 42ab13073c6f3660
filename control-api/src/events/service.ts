// Where a project's events go and what signs them (SPEC.md Outbound deliveries; docs/decisions/0059): the webhook URL
// is the project's configuration (checked by the URL guard, pushed to its runtime like any change); the secret and
// the record of deliveries live on the runtime, which signs and sends, and are read through its admin surface.
import { invalidArgument } from '@agentplane/lib/errors';
import { checkUrl, type UrlPolicy } from '@agentplane/lib/net/url-guard';
import { onProjectRuntime, type Provisioner, type TenantCalls } from '../provisioning/provisioner.js';
import type { ProjectService } from '../projects/service.js';

export interface WebhookOut {
  url: string | null;
}

export class ProjectEventsService {
  constructor(
    private readonly projects: ProjectService,
    private readonly provisioner: Provisioner | undefined,
    private readonly urlPolicy: UrlPolicy,
  ) {}

  async webhook(projectId: string): Promise<WebhookOut> {
    return { url: await this.projects.webhookUrlOf(projectId) };
  }

  /** Sets (or, with null, clears) the URL the project's events go to. */
  async setWebhook(projectId: string, url: string | null): Promise<WebhookOut> {
    await this.projects.targetOf(projectId);
    let stored: string | null = null;
    if (url !== null) {
      const checked = await checkUrl(url, this.urlPolicy, 'url');
      if (checked.url.username !== '' || checked.url.password !== '') throw invalidArgument('url must not carry credentials: deliveries are signed instead');
      stored = checked.url.href;
    }
    await this.projects.applyChange(projectId, async () => ({ set: { webhook_url: stored }, result: undefined }));
    return { url: stored };
  }

  secret(projectId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/webhook-secret'));
  }

  rotateSecret(projectId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'POST', '/webhook-secret/rotate'));
  }

  deliveries(projectId: string, query: { limit: number; status?: string | undefined }): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) =>
      runtime.tenantCall(tenantId, 'GET', '/events', { query: { limit: String(query.limit), ...(query.status ? { status: query.status } : {}) } }),
    );
  }

  redeliver(projectId: string, deliveryId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'POST', `/events/${deliveryId}/redeliver`));
  }

  private onRuntime<T>(projectId: string, call: (runtime: TenantCalls, tenantId: string) => Promise<T>): Promise<T> {
    return onProjectRuntime(this.projects, this.provisioner, projectId, "the project's webhook secret and deliveries are kept there", call);
  }
}
