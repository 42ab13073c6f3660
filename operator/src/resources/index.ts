// The operator's pure builders of desired objects (STYLE.md principle 6): `(project, config) => object`, with labels
// and owner references, no I/O and no randomness, so the same input always builds deep-equal output.
export { canonicalJson, specHash } from './hash.js';
export { ownerReference, projectLabels, projectObjectMeta, runtimeLabels, runtimeSelector } from './metadata.js';
export {
  DATA_PLANE_INGRESS_NAME,
  LIMIT_RANGE_NAME,
  QUOTA_NAME,
  RUNTIME_NAME,
  RUNTIME_PORT_NAME,
  RUNTIME_SECRET_NAME,
  blobKeyPrefix,
  dataPlaneHost,
  dataPlaneUrl,
  projectDatabaseName,
  projectNamespaceName,
  redisKeyPrefix,
  runtimeUrl,
} from './names.js';
export {
  POD_SECURITY_LABELS,
  buildLimitRange,
  buildNamespace,
  buildResourceQuota,
  buildSandboxQuota,
  buildRoleBinding,
  buildServiceAccount,
  namespaceConflict,
  ownsNamespace,
} from './namespace.js';
export { BLOCKED_IPV4_RANGES, BLOCKED_IPV6_RANGES, NETWORK_POLICY_NAMES, buildNetworkPolicies } from './network.js';
export { PROJECT_OBJECT_KINDS, buildProjectObjects } from './project.js';
export { quantityValue } from './quantity.js';
export {
  RUNTIME_DATA_DIR,
  RUNTIME_USER_ID,
  SECRET_HASH_ANNOTATION,
  buildDataPlaneIngress,
  buildRuntimeDeployment,
  buildRuntimeDisruptionBudget,
  buildRuntimeService,
  runtimeEnv,
  runtimeResources,
} from './runtime.js';
export { RUNTIME_SECRET_KEYS, buildRuntimeSecret, runtimeSecretEntries, runtimeSecretHash, type RuntimeSecretValues } from './secret.js';
export { tenantRegistration } from './tenant.js';
