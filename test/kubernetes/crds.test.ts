// The CRDs in crds/ on a real API server, seen the way an admin and the control-api see them: they install, accept
// what resources.ts types, refuse bad objects with a message that says what to fix, keep status apart from spec,
// and teach through `kubectl get` columns and `kubectl explain`.
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_VERSION,
  GROUP,
  PROJECTS,
  TENANTS,
  VERSION,
  projectNamespace,
  type Project,
  type Tenant,
} from '@agentplane/lib/kubernetes/resources';
import { eventually } from '../harness/eventually.js';
import { kubernetesBinaries, startKubernetes, type CommandResult, type KubernetesCluster } from '../harness/kubernetes.js';

const binaries = kubernetesBinaries();
const crdDir = fileURLToPath(new URL('../../crds/', import.meta.url));

// The control-api names Projects and Tenants by UUIDs; these are fixed so failures are easy to read.
const projectName = '0b5e3c1a-9f1e-4c1d-8e7a-2f3b4c5d6e7f';
const namespace = projectNamespace(projectName);
const tenantId = '7c9e6679-7425-40de-944b-e07fc1f90ae7';

function project(name: string, spec: Project['spec'] = {}): Project {
  return { apiVersion: API_VERSION, kind: 'Project', metadata: { name }, spec };
}

function tenant(id: string, spec: Partial<Tenant['spec']> = {}, name = id): Tenant {
  return {
    apiVersion: API_VERSION,
    kind: 'Tenant',
    metadata: { name, namespace },
    spec: { tenantId: id, project: projectName, ...spec },
  };
}

/** A condition as the operator writes it. */
function condition(type: string, status: 'True' | 'False', reason: string, message: string) {
  return { type, status, reason, message, lastTransitionTime: '2025-01-01T00:00:00Z', observedGeneration: 1 };
}

describe.skipIf(!binaries)('the agentplane CRDs on a real API server', () => {
  let cluster: KubernetesCluster;
  let objects: k8s.CustomObjectsApi;

  /** Runs kubectl and fails with its stderr unless it succeeds. */
  async function kubectl(args: string[], input?: string): Promise<string> {
    const result = await cluster.kubectl(args, input === undefined ? {} : { input });
    if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed (${result.code}):\n${result.stderr}`);
    return result.stdout;
  }

  /** Creates an object with kubectl as an admin would, expecting the API server to refuse it. */
  async function refusal(object: unknown, verb: 'create' | 'apply' = 'create'): Promise<CommandResult> {
    const result = await cluster.kubectl([verb, '-f', '-'], { input: JSON.stringify(object) });
    expect(result.code, `kubectl ${verb} succeeded:\n${result.stdout}`).not.toBe(0);
    return result;
  }

  beforeAll(async () => {
    cluster = await startKubernetes(binaries!, { controllerManager: false, kwok: false });
    objects = cluster.kubeConfig().makeApiClient(k8s.CustomObjectsApi);
    await kubectl(['apply', '-f', crdDir]);
    await kubectl(['wait', '--for=condition=Established', '--timeout=60s', `crd/${PROJECTS}.${GROUP}`, `crd/${TENANTS}.${GROUP}`]);
    await kubectl(['create', 'namespace', namespace]);
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  it('installs both kinds under agentplane.io/v1alpha1 with their short names and scopes', async () => {
    const resources = await kubectl(['api-resources', `--api-group=${GROUP}`, '--no-headers']);
    const rows = resources
      .trim()
      .split('\n')
      .map((line) => line.trim().split(/\s+/));
    expect(rows).toEqual(
      expect.arrayContaining([
        ['projects', 'proj', API_VERSION, 'false', 'Project'],
        ['tenants', 'tnt', API_VERSION, 'true', 'Tenant'],
      ]),
    );
  });

  it('accepts a Project and a Tenant as resources.ts types them, and keeps every field', async () => {
    const fullProject = project(projectName, {
      displayName: 'Acme support',
      dataPlane: { host: 'support.acme.example.com' },
      runtime: {
        image: 'registry.example.com/agentplane:0.1.0-rc1',
        replicas: 2,
        resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '1', memory: '1Gi' } },
      },
      quota: { requests: { cpu: '4', memory: '8Gi' }, limits: { cpu: '8', memory: '16Gi' }, pods: 50 },
      containerDefaults: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '500m', memory: '512Mi' } },
    });
    const createdProject = (await objects.createClusterCustomObject({ group: GROUP, version: VERSION, plural: PROJECTS, body: fullProject })) as Project;
    expect(createdProject.spec).toEqual(fullProject.spec);

    const fullTenant = tenant(tenantId, { displayName: 'Acme', settings: { default_model: 'gpt-4o-mini', limits: { turns: 10, tools: ['search'] }, beta: true } });
    const createdTenant = (await objects.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: TENANTS, body: fullTenant })) as Tenant;
    expect(createdTenant.spec).toEqual(fullTenant.spec);
  });

  it('accepts the smallest Project the control-api writes: a UUID name and an empty spec', async () => {
    await kubectl(['create', '-f', '-'], JSON.stringify(project('5f0c1b2a-0000-4000-8000-000000000001')));
  });

  describe('refuses, saying what to fix,', () => {
    const cases: { what: string; object: Project | Tenant | Record<string, unknown>; says: string[] }[] = [
      {
        what: 'a data-plane host with a scheme',
        object: project('bad-host', { dataPlane: { host: 'https://support.example.com' } }),
        says: ['spec.dataPlane.host', '"https://support.example.com" is not a host name'],
      },
      {
        what: 'a data-plane host that is an IP address',
        object: project('ip-host', { dataPlane: { host: '10.0.0.1' } }),
        says: ['spec.dataPlane.host', '"10.0.0.1" is not a host name'],
      },
      {
        what: 'a data-plane host with a wildcard',
        object: project('wildcard-host', { dataPlane: { host: '*.example.com' } }),
        says: ['spec.dataPlane.host', 'is not a host name'],
      },
      {
        what: 'a Project name longer than 40 characters',
        object: project('a'.repeat(41)),
        says: ['metadata.name', "a Project's name is at most 40 characters"],
      },
      {
        what: 'a Project name that is not a DNS label',
        object: project('acme.support'),
        says: ['metadata.name', "a Project's name is a DNS label"],
      },
      {
        what: 'a tenant id that is not a lower-case UUID',
        object: tenant('7C9E6679-7425-40DE-944B-E07FC1F90AE7'),
        says: ['spec.tenantId', 'is not a lower-case UUID'],
      },
      {
        what: 'a tenant id that is no UUID at all',
        object: tenant('acme'),
        says: ['spec.tenantId', '"acme" is not a lower-case UUID'],
      },
      {
        what: 'a Tenant whose name is not its tenant id',
        object: tenant('9b2d7c1e-1111-4222-8333-444455556666', {}, 'acme'),
        says: ['metadata.name', 'metadata.name must equal spec.tenantId'],
      },
      {
        what: 'a Tenant without its project',
        object: { ...tenant('9b2d7c1e-1111-4222-8333-444455556667'), spec: { tenantId: '9b2d7c1e-1111-4222-8333-444455556667' } },
        says: ['spec.project', 'Required value'],
      },
      {
        what: 'a memory amount that is not a quantity',
        object: project('bad-memory', { runtime: { resources: { requests: { memory: 'lots' } } } }),
        says: ['spec.runtime.resources.requests.memory', '"lots" is not a memory quantity'],
      },
      {
        what: 'a negative cpu amount',
        object: project('negative-cpu', { quota: { limits: { cpu: '-1' } } }),
        says: ['spec.quota.limits.cpu', '"-1" is not a CPU quantity'],
      },
      {
        what: 'a quantity written as a number rather than a string',
        object: { ...project('numeric-cpu'), spec: { containerDefaults: { limits: { cpu: 2 } } } },
        says: ['spec.containerDefaults.limits.cpu', 'must be of type string'],
      },
      {
        what: 'a limit below its request',
        object: project('limit-below-request', { runtime: { resources: { requests: { cpu: '2', memory: '1Gi' }, limits: { cpu: '1500m', memory: '2Gi' } } } }),
        says: ['spec.runtime.resources.limits.cpu', 'limits.cpu must be at least requests.cpu'],
      },
      {
        what: 'a quota whose limits are below its requests',
        object: project('quota-below', { quota: { requests: { memory: '2Gi' }, limits: { memory: '1Gi' } } }),
        says: ['spec.quota.limits.memory', 'limits.memory must be at least requests.memory'],
      },
      {
        what: 'no runtime replicas',
        object: project('no-replicas', { runtime: { replicas: 0 } }),
        says: ['spec.runtime.replicas', 'greater than or equal to 1'],
      },
      {
        what: 'more than 20 runtime replicas',
        object: project('many-replicas', { runtime: { replicas: 21 } }),
        says: ['spec.runtime.replicas', 'less than or equal to 20'],
      },
      {
        what: 'a quota of no Pods',
        object: project('no-pods', { quota: { pods: 0 } }),
        says: ['spec.quota.pods', 'greater than or equal to 1'],
      },
      {
        what: 'an image reference with a space',
        object: project('spaced-image', { runtime: { image: 'registry.example.com/agentplane 0.1' } }),
        says: ['spec.runtime.image', 'an image reference is not empty and has no spaces'],
      },
      {
        what: 'more than 64 settings',
        object: tenant('9b2d7c1e-1111-4222-8333-444455556668', { settings: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`setting_${i}`, i])) }),
        says: ['spec.settings', 'must have at most 64 items'],
      },
      {
        what: 'a misspelt field (rather than silently dropping it)',
        object: { ...project('misspelt'), spec: { runtime: { replica: 2 } } },
        says: ['unknown field "spec.runtime.replica"'],
      },
    ];

    it.each(cases)('$what', async ({ object, says }) => {
      const { stderr } = await refusal(object);
      for (const words of says) expect(stderr).toContain(words);
    });
  });

  it('keeps a Tenant to its tenant id and project for life', async () => {
    const id = '3d6f0a8b-2c4e-4f1a-9b7d-5e8c0a2b4d6f';
    await kubectl(['create', '-f', '-'], JSON.stringify(tenant(id)));
    // Moving the tenant to another project (an apply of the changed object, as an admin would try).
    const movedProject = await refusal(tenant(id, { project: 'another-project' }), 'apply');
    expect(movedProject.stderr).toContain('spec.project is immutable');
    // Changing the id alone also breaks the name rule; both say so.
    const changedId = await refusal(tenant('3d6f0a8b-2c4e-4f1a-9b7d-000000000000', {}, id), 'apply');
    expect(changedId.stderr).toContain('spec.tenantId is immutable');
    // Other fields stay editable.
    await kubectl(['apply', '-f', '-'], JSON.stringify(tenant(id, { displayName: 'Renamed', settings: { default_model: 'gpt-4o' } })));
    const stored = JSON.parse(await kubectl(['get', 'tenant', id, '-n', namespace, '-o', 'json'])) as Tenant;
    expect(stored.spec).toEqual({ tenantId: id, project: projectName, displayName: 'Renamed', settings: { default_model: 'gpt-4o' } });
  });

  it('keeps status apart from spec: each is written through its own endpoint only', async () => {
    const name = 'status-subresource';
    await kubectl(['create', '-f', '-'], JSON.stringify(project(name, { displayName: 'before' })));
    const status = {
      observedGeneration: 1,
      namespace: projectNamespace(name),
      dataPlaneUrl: `https://${name}.agentplane.local`,
      runtimeUrl: `http://agent-runtime.${projectNamespace(name)}.svc:8081`,
      conditions: [condition('Ready', 'True', 'Reconciled', 'The runtime answers /ready.')],
    };
    // A status write through the status subresource: status changes, spec and generation do not.
    await kubectl(['patch', 'project', name, '--subresource=status', '--type=merge', '-p', JSON.stringify({ spec: { displayName: 'sneaked in' }, status })]);
    const afterStatus = JSON.parse(await kubectl(['get', 'project', name, '-o', 'json'])) as Project;
    expect(afterStatus.status).toEqual(status);
    expect(afterStatus.spec).toEqual({ displayName: 'before' });
    expect(afterStatus.metadata.generation).toBe(1);

    // A spec write: spec changes and the generation moves on; status does not.
    await kubectl(['patch', 'project', name, '--type=merge', '-p', JSON.stringify({ spec: { displayName: 'after' }, status: { namespace: 'elsewhere' } })]);
    const afterSpec = JSON.parse(await kubectl(['get', 'project', name, '-o', 'json'])) as Project;
    expect(afterSpec.spec).toEqual({ displayName: 'after' });
    expect(afterSpec.status).toEqual(status);
    expect(afterSpec.metadata.generation).toBe(2);
  });

  it('refuses a status whose condition is not a metav1.Condition', async () => {
    const name = 'bad-condition';
    await kubectl(['create', '-f', '-'], JSON.stringify(project(name)));
    const result = await cluster.kubectl([
      'patch', 'project', name, '--subresource=status', '--type=merge',
      '-p', JSON.stringify({ status: { conditions: [{ type: 'Ready', status: 'Yes', reason: 'not camel case', message: '' }] } }),
    ]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('status.conditions[0].status: Unsupported value: "Yes"');
    expect(result.stderr).toContain('status.conditions[0].lastTransitionTime: Required value');
  });

  it('shows Ready, Reason, Namespace, Data-plane URL and Project in kubectl get', async () => {
    const name = 'printed';
    const ns = projectNamespace(name);
    const id = 'c0ffee00-1234-4abc-8def-0123456789ab';
    await kubectl(['create', 'namespace', ns]);
    await kubectl(['create', '-f', '-'], JSON.stringify(project(name, { displayName: 'Printed' })));
    await kubectl(['create', '-f', '-'], JSON.stringify({ ...tenant(id, { project: name, displayName: 'Printed tenant' }), metadata: { name: id, namespace: ns } }));
    await kubectl([
      'patch', 'project', name, '--subresource=status', '--type=merge',
      '-p', JSON.stringify({ status: { namespace: ns, dataPlaneUrl: 'https://printed.agentplane.local', conditions: [condition('Ready', 'False', 'RuntimeUnavailable', 'No runtime replica is available yet.')] } }),
    ]);
    await kubectl([
      'patch', 'tenant', id, '-n', ns, '--subresource=status', '--type=merge',
      '-p', JSON.stringify({ status: { conditions: [condition('Ready', 'True', 'Registered', 'Registered with the runtime; settings in sync.')] } }),
    ]);

    const projects = table(await kubectl(['get', 'projects']));
    expect(projects.header).toEqual(['NAME', 'READY', 'REASON', 'NAMESPACE', 'DATA-PLANE URL', 'AGE']);
    expect(projects.row(name)).toMatchObject({ READY: 'False', REASON: 'RuntimeUnavailable', NAMESPACE: ns, 'DATA-PLANE URL': 'https://printed.agentplane.local' });

    const tenants = table(await kubectl(['get', 'tenants', '-n', ns, '-o', 'wide']));
    expect(tenants.header).toEqual(['NAME', 'READY', 'REASON', 'PROJECT', 'DISPLAY NAME', 'AGE']);
    expect(tenants.row(id)).toMatchObject({ READY: 'True', REASON: 'Registered', PROJECT: name, 'DISPLAY NAME': 'Printed tenant' });

    // Both kinds together, as an admin asks for them.
    const both = await kubectl(['get', 'projects,tenants', '-A']);
    expect(both).toMatch(/^NAME\s+READY\s+REASON\s+NAMESPACE\s+DATA-PLANE URL\s+AGE$/m);
    expect(both).toMatch(/^NAMESPACE\s+NAME\s+READY\s+REASON\s+PROJECT\s+AGE$/m);
    expect(both).toMatch(new RegExp(`^project\\.agentplane\\.io/${name}\\s+False\\s+RuntimeUnavailable\\s+${ns}\\s+https://printed\\.agentplane\\.local\\s`, 'm'));
    expect(both).toMatch(new RegExp(`^${ns}\\s+tenant\\.agentplane\\.io/${id}\\s+True\\s+Registered\\s+${name}\\s`, 'm'));
  });

  it('lists both kinds under the agentplane category and answers to the short names', async () => {
    const all = await kubectl(['get', 'agentplane', '-A', '-o', 'name']);
    expect(all).toContain(`project.agentplane.io/${projectName}`);
    expect(all).toContain(`tenant.agentplane.io/${tenantId}`);
    expect(await kubectl(['get', 'proj', projectName, '-o', 'name'])).toBe(`project.agentplane.io/${projectName}\n`);
    expect(await kubectl(['get', 'tnt', tenantId, '-n', namespace, '-o', 'name'])).toBe(`tenant.agentplane.io/${tenantId}\n`);
  });

  it('teaches through kubectl explain', async () => {
    // The API server publishes a new CRD's OpenAPI a moment after it is Established.
    const runtime = await eventually(() => kubectl(['explain', 'project.spec.runtime']), { what: 'kubectl explain project.spec.runtime' });
    expect(runtime).toContain("The project's agent-runtime Deployment.");
    expect(runtime).toMatch(/replicas\s+<integer>\s+How many runtime Pods serve the project, 1 to 20\. Default 1\./);
    expect(runtime).toMatch(/image\s+<string>\s+Container image of the runtime/);

    const tenantId = await kubectl(['explain', 'tenant.spec.tenantId']);
    expect(tenantId).toContain("The tenant's id on its runtime, a lower-case UUID");
    const conditions = await kubectl(['explain', 'project.status.conditions']);
    expect(conditions).toContain('NamespaceReady');
  });
});

/** A `kubectl get` table by column: headers are separated by two or more spaces, some contain one. */
function table(output: string): { header: string[]; row(name: string): Record<string, string> } {
  const [headerLine = '', ...lines] = output.trimEnd().split('\n');
  const starts = [...headerLine.matchAll(/(?:^|\s{2,})(\S+(?: \S+)*)/g)].map((m) => m.index + m[0].length - m[1]!.length);
  const header = starts.map((start, i) => headerLine.slice(start, starts[i + 1]).trim());
  const cells = (line: string) => Object.fromEntries(header.map((name, i) => [name, line.slice(starts[i], starts[i + 1]).trim()]));
  return {
    header,
    row(name) {
      const line = lines.find((l) => l.startsWith(`${name} `));
      if (!line) throw new Error(`no row ${name} in:\n${output}`);
      return cells(line);
    },
  };
}
