// The project's skills (SPEC.md control-plane `skills`; docs/decisions/0056): kept on the runtime with their files,
// like the corpus; a package posted here is relayed to the project's runtime as the form it came in, and the
// runtime's refusals come back as they were. The listing shows every package, the project's and each end-user's,
// told apart by `visibility` and `owner_subject`.
import type { UploadedFile } from '@agentplane/lib/http/multipart';
import type { ProjectService } from '../projects/service.js';
import { onProjectRuntime, type Provisioner, type TenantCalls } from '../provisioning/provisioner.js';

export class SkillRelay {
  constructor(
    private readonly projects: ProjectService,
    private readonly provisioner: Provisioner | undefined,
  ) {}

  list(projectId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'GET', '/plugins'));
  }

  upload(projectId: string, file: UploadedFile | undefined, files: UploadedFile[]): Promise<unknown> {
    const form = new FormData();
    if (file) form.append('file', new Blob([file.bytes]), file.filename ?? 'package');
    for (const part of files) form.append('files', new Blob([part.bytes]), part.filename ?? '');
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'POST', '/plugins', { body: form }));
  }

  remove(projectId: string, pluginId: string): Promise<unknown> {
    return this.onRuntime(projectId, (runtime, tenantId) => runtime.tenantCall(tenantId, 'DELETE', `/plugins/${pluginId}`));
  }

  private onRuntime<T>(projectId: string, call: (runtime: TenantCalls, tenantId: string) => Promise<T>): Promise<T> {
    return onProjectRuntime(this.projects, this.provisioner, projectId, "the project's skills are kept there", call);
  }
}
