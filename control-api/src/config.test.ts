// Choosing the provisioner is one config value; each one's own settings are refused with the other, saying why.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '@agentplane/lib/config';
import { loadControlApiConfig } from './config.js';

const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadControlApiConfig(env);
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
};

describe('the provisioner in the control-api config', () => {
  it('is local by default, reaching RUNTIME_URL with RUNTIME_ADMIN_KEY when both are set', () => {
    expect(loadControlApiConfig({}).provisioner).toEqual({ kind: 'local', runtime: undefined });
    expect(loadControlApiConfig({ RUNTIME_URL: 'http://runtime:8081/', RUNTIME_ADMIN_KEY: 'k'.repeat(32) }).provisioner).toEqual({
      kind: 'local',
      runtime: { url: 'http://runtime:8081', adminKey: 'k'.repeat(32) },
    });
    expect(problemsOf({ RUNTIME_URL: 'http://runtime:8081' })).toEqual(['RUNTIME_URL and RUNTIME_ADMIN_KEY go together: set both or neither']);
  });

  it('is kubernetes with PROVISIONER=kubernetes: in-cluster unless KUBECONFIG names a file, with the operator\'s namespace prefix', () => {
    expect(loadControlApiConfig({ PROVISIONER: 'kubernetes' }).provisioner).toEqual({ kind: 'kubernetes', kubeconfig: undefined, projectNamespacePrefix: 'agentplane-' });
    expect(loadControlApiConfig({ PROVISIONER: 'kubernetes', KUBECONFIG: '/etc/kube/config', PROJECT_NAMESPACE_PREFIX: 'ap-' }).provisioner).toEqual({
      kind: 'kubernetes',
      kubeconfig: '/etc/kube/config',
      projectNamespacePrefix: 'ap-',
    });
  });

  it('refuses the local runtime settings with kubernetes, a bad prefix, the prefix with local, and an unknown provisioner', () => {
    const withRuntime = problemsOf({ PROVISIONER: 'kubernetes', RUNTIME_URL: 'http://runtime:8081', RUNTIME_ADMIN_KEY: 'k'.repeat(32) });
    expect(withRuntime).toHaveLength(2);
    expect(withRuntime[0]).toMatch(/^RUNTIME_URL is for PROVISIONER=local only: .*Project's status and Secret/);
    expect(withRuntime[1]).toMatch(/^RUNTIME_ADMIN_KEY is for PROVISIONER=local only/);
    expect(problemsOf({ PROVISIONER: 'kubernetes', PROJECT_NAMESPACE_PREFIX: 'Agent_Plane-' })[0]).toMatch(/^PROJECT_NAMESPACE_PREFIX must be at most 21 lower-case/);
    expect(problemsOf({ PROJECT_NAMESPACE_PREFIX: 'ap-' })[0]).toMatch(/^PROJECT_NAMESPACE_PREFIX is for PROVISIONER=kubernetes only/);
    expect(problemsOf({ PROVISIONER: 'k8s' })).toEqual(['PROVISIONER="k8s" is not valid: expected one of local, kubernetes']);
  });
});
