// The Secret `agentplane-runtime`: the keys the runtime's replicas must share (admin key, master key) and the store
// credentials. The reconciler reads or generates the values; this module only lays them out, as `data` (base64),
// because `stringData` is write-only and a read-back could never match what was applied.
import type * as k8s from '@kubernetes/client-node';
import type { Project } from '@agentplane/lib/kubernetes/resources';
import type { OperatorConfig } from '../config.js';
import { specHash } from './hash.js';
import { projectObjectMeta, runtimeLabels } from './metadata.js';
import { RUNTIME_SECRET_NAME } from './names.js';

/** Values the reconciler reads from the existing Secret or generates; the builder never generates randomness. */
export interface RuntimeSecretValues {
  adminKey: string;
  /** base64 of 32 bytes. */
  masterKey: string;
  /** postgres://role:password@host:port/db, when a database admin URL is configured. */
  databaseUrl?: string;
  /** The key the project's task CronJobs fire with (docs/decisions/0066): the runtime checks it, their Pods present it. */
  fireKey?: string;
  /** The browser server's token (docs/decisions/0092), when the operator runs a browser per project. */
  browserToken?: string;
}

/** The Secret's keys: the control-api reads `admin-key`; the Deployment's env refers to the rest. */
export const RUNTIME_SECRET_KEYS = {
  adminKey: 'admin-key',
  masterKey: 'master-key',
  databaseUrl: 'database-url',
  fireKey: 'task-fire-key',
  redisUrl: 'redis-url',
  s3AccessKeyId: 's3-access-key-id',
  s3SecretAccessKey: 's3-secret-access-key',
  pineconeApiKey: 'pinecone-api-key',
  browserToken: 'browser-token',
} as const;

/** The Secret's content as plain strings: only the keys that have a value, so every env reference resolves. */
export function runtimeSecretEntries(secrets: RuntimeSecretValues, config: OperatorConfig): Record<string, string> {
  const entries: Record<string, string> = { [RUNTIME_SECRET_KEYS.adminKey]: secrets.adminKey, [RUNTIME_SECRET_KEYS.masterKey]: secrets.masterKey };
  if (secrets.databaseUrl !== undefined) entries[RUNTIME_SECRET_KEYS.databaseUrl] = secrets.databaseUrl;
  if (secrets.fireKey !== undefined) entries[RUNTIME_SECRET_KEYS.fireKey] = secrets.fireKey;
  if (secrets.browserToken !== undefined) entries[RUNTIME_SECRET_KEYS.browserToken] = secrets.browserToken;
  const { redisUrl, s3, pinecone } = config.stores;
  if (redisUrl !== undefined) entries[RUNTIME_SECRET_KEYS.redisUrl] = redisUrl;
  if (pinecone !== undefined) entries[RUNTIME_SECRET_KEYS.pineconeApiKey] = pinecone.apiKey;
  if (s3?.accessKeyId !== undefined) entries[RUNTIME_SECRET_KEYS.s3AccessKeyId] = s3.accessKeyId;
  if (s3?.secretAccessKey !== undefined) entries[RUNTIME_SECRET_KEYS.s3SecretAccessKey] = s3.secretAccessKey;
  return entries;
}

/** A hash of the Secret's content for the Pod template, so a changed secret rolls the runtime's Pods. */
export function runtimeSecretHash(secrets: RuntimeSecretValues, config: OperatorConfig): string {
  return specHash(runtimeSecretEntries(secrets, config));
}

export function buildRuntimeSecret(project: Project, namespace: string, config: OperatorConfig, secrets: RuntimeSecretValues): k8s.V1Secret {
  const data = Object.fromEntries(
    Object.entries(runtimeSecretEntries(secrets, config)).map(([key, value]) => [key, Buffer.from(value, 'utf8').toString('base64')]),
  );
  return { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata: projectObjectMeta(project, namespace, RUNTIME_SECRET_NAME, runtimeLabels(project)), data };
}
