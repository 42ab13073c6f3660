// The agentplane.io/v1alpha1 custom resources as TypeScript: Project (cluster-scoped, one per customer project)
// and Tenant (namespaced, in its project's namespace). crds/*.yaml is the source of truth for their schemas;
// resources.test.ts keeps these types and those schemas in step. Shared by the operator (which reconciles them)
// and the control-api's kubernetes provisioner (which writes them and reads their status).

export const GROUP = 'agentplane.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** Plural names, as they appear in API paths and RBAC rules. */
export const PROJECTS = 'projects';
export const TENANTS = 'tenants';

/** Finalizers: the operator removes each only once its erase has completed. */
export const PROJECT_FINALIZER = 'agentplane.io/project-erase';
export const TENANT_FINALIZER = 'agentplane.io/tenant-erase';

/** Labels on every object the operator makes, and on Tenants (set by whoever writes them). */
export const LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  partOf: 'app.kubernetes.io/part-of',
  component: 'app.kubernetes.io/component',
  name: 'app.kubernetes.io/name',
  project: 'agentplane.io/project',
} as const;
export const MANAGED_BY = 'agentplane-operator';

/**
 * The component label of a scheduled task's CronJob, its Jobs and their Pods (docs/decisions/0066): the runtime
 * writes them, the operator's NetworkPolicies let their Pods reach the runtime.
 */
export const TASK_FIRE_COMPONENT = 'task-fire';

/**
 * The component label of a sandbox's Pod and claim (docs/decisions/0081): the runtime writes them; the operator's
 * NetworkPolicies leave them out of every allow, so a sandbox has no network at all.
 */
export const SANDBOX_COMPONENT = 'sandbox';
/** The label naming which sandbox a Pod or claim is (the runtime's sandbox id). */
export const SANDBOX_ID_LABEL = 'agentplane.io/sandbox';

/** Annotation holding a hash of what the operator last wrote to an object, so unchanged objects are not rewritten. */
export const SPEC_HASH_ANNOTATION = 'agentplane.io/spec-hash';

/** A resource quantity as Kubernetes writes it (`500m`, `1Gi`, `2`). */
export type Quantity = string;

export interface ResourceAmounts {
  cpu?: Quantity;
  memory?: Quantity;
}

export interface ResourceRequirements {
  requests?: ResourceAmounts;
  limits?: ResourceAmounts;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}

/** A status condition as metav1.Condition has it. */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  /** CamelCase, machine-readable: `RuntimeUnavailable`, `EraseIncomplete`. */
  reason: string;
  /** What a person can act on. */
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

// ---------------------------------------------------------------------------------------------------------------
// Project

export interface ProjectSpec {
  /** A label for people, shown by kubectl. */
  displayName?: string;
  dataPlane?: {
    /** The host the project's data plane is served on; default `<project>.<operator's data-plane domain>`. */
    host?: string;
  };
  runtime?: {
    /** Overrides the operator's runtime image (admins only; the control-api never sets it). */
    image?: string;
    /** Runtime replicas, 1 to 20; default 1. */
    replicas?: number;
    /** Requests and limits of the runtime container; defaults come from the operator's config. */
    resources?: ResourceRequirements;
  };
  /** The namespace's ResourceQuota: what all the project's Pods (runtime, tasks, sandboxes) may use together. */
  quota?: {
    requests?: ResourceAmounts;
    limits?: ResourceAmounts;
    pods?: number;
  };
  /** The namespace's LimitRange: what a container without its own requests and limits gets. */
  containerDefaults?: ResourceRequirements;
  /** The project's computer as the control-api holds it: the operator's quota on sandboxes follows it. */
  computer?: {
    /** Sandboxes the project holds at once (each has one claim); default the computer settings' default, 10. */
    maxSandboxes?: number;
  };
}

export const PROJECT_CONDITIONS = {
  /** Everything below is True and the runtime answers `/ready`. */
  ready: 'Ready',
  /** Namespace, ServiceAccount, Role, NetworkPolicies, ResourceQuota, LimitRange exist as desired. */
  namespaceReady: 'NamespaceReady',
  /** The project's own PostgreSQL database and role exist (or none is configured). */
  databaseReady: 'DatabaseReady',
  /** The runtime Deployment has its replicas available. */
  runtimeAvailable: 'RuntimeAvailable',
  /** The spec can be run with the operator's configuration (False: the last accepted spec keeps running). */
  specAccepted: 'SpecAccepted',
} as const;

export interface ProjectStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  /** The project's namespace, where its Tenants and runtime live. */
  namespace?: string;
  /** Where customers call the project's data plane. */
  dataPlaneUrl?: string;
  /** Where the operator and the control-api reach the runtime's admin surface (in-cluster). */
  runtimeUrl?: string;
}

export interface Project {
  apiVersion: typeof API_VERSION;
  kind: 'Project';
  metadata: ObjectMeta;
  spec: ProjectSpec;
  status?: ProjectStatus;
}

// ---------------------------------------------------------------------------------------------------------------
// Tenant

export interface TenantSpec {
  /** The tenant's id on its runtime (a lower-case UUID). Immutable. */
  tenantId: string;
  /** The Project this tenant belongs to; must be the Project whose namespace holds the Tenant. Immutable. */
  project: string;
  /** A label for people (the runtime's tenant `name`). */
  displayName?: string;
  /** Non-secret settings merged into the runtime's `settings_json`; secrets travel over the admin channel only. */
  settings?: Record<string, unknown>;
}

export const TENANT_CONDITIONS = {
  /** Registered and settings in sync. */
  ready: 'Ready',
  /** The runtime has the tenant (`POST /tenants`). */
  registered: 'Registered',
  /** The runtime's settings are this generation's (`PATCH /tenants/{id}`). */
  settingsSynced: 'SettingsSynced',
  /** Set while the object is being deleted: the erase's progress and, once done, its outcome. */
  erased: 'Erased',
} as const;

/** One step of the runtime's erase report (runtime `DELETE /tenants/{id}`, docs/decisions/0003). */
export interface EraseStepOutcome {
  step: string;
  phase: 'stop_work' | 'sandboxes' | 'rows' | 'outside_database';
  outcome: 'done' | 'failed' | 'already_done' | 'not_run';
  items?: number;
  error?: string;
}

export interface TenantEraseReport {
  complete: boolean;
  erasedAt: string;
  rowsDeleted?: Record<string, number>;
  steps: EraseStepOutcome[];
}

export interface TenantStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  /** When the operator first asked the runtime to register the tenant (written before asking). */
  registrationAttemptedAt?: string;
  /** When the runtime first accepted the tenant. */
  registeredAt?: string;
  /** The runtime's report of the erase, recorded before the finalizer is removed. */
  erase?: TenantEraseReport;
}

export interface Tenant {
  apiVersion: typeof API_VERSION;
  kind: 'Tenant';
  metadata: ObjectMeta;
  spec: TenantSpec;
  status?: TenantStatus;
}

/** The namespace a Project's objects and Tenants live in. */
export function projectNamespace(projectName: string, prefix = 'agentplane-'): string {
  return `${prefix}${projectName}`;
}
