// Rendering and installing the Helm chart (charts/agentplane) in tests, and acting as one of its ServiceAccounts:
// the chart suite uses these, and so can any suite that runs a program under exactly the RBAC the chart grants.
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { CommandResult, KubernetesCluster } from '../harness/kubernetes.js';

export const chartDir = fileURLToPath(new URL('../../charts/agentplane', import.meta.url));

/** One object of a rendered manifest, as much of it as the tests read. */
export interface ManifestObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

export interface ChartOptions {
  release?: string;
  namespace?: string;
  /** Values, passed with `--set-json` per top-level key. */
  values?: Record<string, unknown>;
  /** More `helm` arguments, such as `--show-only templates/runtime-clusterrole.yaml`. */
  args?: string[];
}

/** Values as `--set-json` arguments, one per top-level key: no file to write or clean up. */
function valuesArgs(values: Record<string, unknown> | undefined): string[] {
  return Object.entries(values ?? {}).map(([key, value]) => `--set-json=${key}=${JSON.stringify(value)}`);
}

/** Runs the helm binary without a cluster (lint, template). */
export function runHelm(helm: string, args: string[]): Promise<CommandResult> {
  // Helm's own config, cache and data dirs: one of the tests', not a developer's.
  const home = join(tmpdir(), 'agentplane-helm-home');
  return new Promise((resolve, reject) => {
    const child = spawn(helm, args, {
      env: {
        ...process.env,
        HOME: home,
        HELM_CACHE_HOME: join(home, 'cache'),
        HELM_CONFIG_HOME: join(home, 'config'),
        HELM_DATA_HOME: join(home, 'data'),
        KUBECONFIG: join(home, 'no-cluster'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve({ stdout, stderr, code: code ?? 1 }));
  });
}

export function lintChart(helm: string, values?: Record<string, unknown>): Promise<CommandResult> {
  return runHelm(helm, ['lint', '--strict', chartDir, ...valuesArgs(values)]);
}

/** `helm template` as a result (for expected failures). */
export function templateChart(helm: string, options: ChartOptions = {}): Promise<CommandResult> {
  return runHelm(helm, [
    'template',
    options.release ?? 'agentplane',
    chartDir,
    '--namespace',
    options.namespace ?? 'agentplane-system',
    ...valuesArgs(options.values),
    ...(options.args ?? []),
  ]);
}

/** The objects `helm template` renders; throws with helm's message when it fails. */
export async function renderChart(helm: string, options: ChartOptions = {}): Promise<ManifestObject[]> {
  const result = await templateChart(helm, options);
  if (result.code !== 0) throw new Error(`helm template failed:\n${result.stderr}`);
  return parseManifest(result.stdout);
}

export function parseManifest(text: string): ManifestObject[] {
  return parseAllDocuments(text).flatMap((document) => {
    if (document.errors.length > 0) throw new Error(`the manifest does not parse: ${document.errors[0]!.message}`);
    const object = document.toJSON() as ManifestObject | null;
    return object ? [object] : [];
  });
}

/** `helm install` without `--wait`: returns once the API server holds every object; its stdout has the notes. */
export async function installChart(cluster: KubernetesCluster, options: ChartOptions & { release: string; namespace: string }): Promise<CommandResult> {
  const result = await cluster.helm(['install', options.release, chartDir, '--namespace', options.namespace, ...valuesArgs(options.values), ...(options.args ?? [])]);
  if (result.code !== 0) throw new Error(`helm install failed:\n${result.stderr}`);
  return result;
}

/**
 * A kubeconfig that acts as a ServiceAccount the chart created, with a token from the TokenRequest API
 * (`kubectl create token`): what a program running in the chart's Pod would be allowed to do.
 */
export async function serviceAccountKubeconfig(cluster: KubernetesCluster, namespace: string, serviceAccount: string): Promise<string> {
  const result = await cluster.kubectl(['create', 'token', serviceAccount, '--namespace', namespace, '--duration', '1h']);
  if (result.code !== 0) throw new Error(`kubectl create token ${serviceAccount} failed:\n${result.stderr}`);
  return cluster.kubeconfigForToken(result.stdout.trim(), `${namespace}-${serviceAccount}`);
}

/** The chart's ServiceAccount names for a release (no name overrides). */
export function chartServiceAccounts(release: string): { operator: string; controlApi: string } {
  const fullname = release.includes('agentplane') ? release : `${release}-agentplane`;
  return { operator: `${fullname}-operator`, controlApi: `${fullname}-control-api` };
}
