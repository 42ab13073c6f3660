// What the project's runtime holds for the project as a whole, managed here by its admins: the corpus (documents
// every end-user of the project may search) and the wiki the agent writes (docs/decisions/0043). The records live
// on the runtime (DESIGN.md: the runtime owns documents and memory); every call goes to its admin surface for the
// project's tenant, and the runtime's refusals come back as they were (same status, detail and code).
import { onProjectRuntime, runtimeQuery, type Provisioner, type TenantCalls } from '../provisioning/provisioner.js';
import type { ProjectService } from '../projects/service.js';

type Query = Record<string, string | number | undefined>;

export class KnowledgeService {
  constructor(
    private readonly projects: ProjectService,
    private readonly provisioner: Provisioner | undefined,
  ) {}

  listDocuments(projectId: string, query: Query): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/documents', { query: runtimeQuery(query) }));
  }

  createDocument(projectId: string, body: unknown, query: Query): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'POST', '/documents', { body, query: runtimeQuery(query) }));
  }

  getDocument(projectId: string, documentId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', `/documents/${documentId}`));
  }

  actOnDocument(projectId: string, documentId: string, body: unknown, query: Query): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'POST', `/documents/${documentId}`, { body, query: runtimeQuery(query) }));
  }

  deleteDocument(projectId: string, documentId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'DELETE', `/documents/${documentId}`));
  }

  listWiki(projectId: string, query: Query): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/wiki', { query: runtimeQuery(query) }));
  }

  getWikiPage(projectId: string, itemId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', `/wiki/${itemId}`));
  }

  deleteWikiPage(projectId: string, itemId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'DELETE', `/wiki/${itemId}`));
  }

  private onRuntime<T>(projectId: string, call: (runtime: TenantCalls, tenantId: string) => Promise<T>): Promise<T> {
    return onProjectRuntime(this.projects, this.provisioner, projectId, "the project's documents are kept there", call);
  }
}
