// The operator's one door to the Kubernetes API: get/list/create/apply/patch/delete for built-in objects (through
// client-node's KubernetesObjectApi) and for our own Projects and Tenants (through its CustomObjectsApi, which keeps
// them plain JSON). A read of something absent answers null; failures become KubeApiError with the HTTP status, so a
// 409 is recognisable. Every write passes the leadership guard first and is counted, which is how the benchmark and
// the tests see "zero writes at steady state". Reads of objects the operator made may come from its watch caches
// (getCached, listCached: ./owned.ts); every read that reaches the API server is counted too.
import * as k8s from '@kubernetes/client-node';
import { AppError } from '@agentplane/lib/errors';
import { GROUP, PROJECTS, TENANTS, VERSION, type Project, type Tenant } from '@agentplane/lib/kubernetes/resources';

export const FIELD_MANAGER = 'agentplane-operator';

/** Names one object: enough to read, patch or delete it. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

export type WriteVerb = 'create' | 'apply' | 'patch' | 'update_status' | 'delete';

/** A failed API call: the HTTP status and the API server's own reason (`Conflict`, `AlreadyExists`, `Forbidden`...). */
export class KubeApiError extends AppError {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    cause: unknown,
  ) {
    super(status === 409 ? 'conflict' : status === 404 ? 'not_found' : status === 403 ? 'permission_denied' : 'upstream_failed', message, { cause });
    this.name = 'KubeApiError';
  }
}

/** Thrown instead of a write when this replica is not (or no longer) the leader. */
export class NotLeaderError extends AppError {
  constructor() {
    super('unavailable', 'not the leader: writes are left to the replica holding the lease');
    this.name = 'NotLeaderError';
  }
}

export const isConflict = (error: unknown): boolean => error instanceof KubeApiError && error.status === 409;
export const isNotFound = (error: unknown): boolean => error instanceof KubeApiError && error.status === 404;

/** client-node's ApiException carries `code` and the Status body (object or JSON text). */
export function toKubeError(error: unknown, what: string): unknown {
  if (error instanceof KubeApiError || error instanceof NotLeaderError) return error;
  const code = (error as { code?: unknown })?.code;
  if (typeof code !== 'number') return error;
  let body = (error as { body?: unknown }).body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      // a body that is not JSON keeps its text as the message
    }
  }
  const status = body && typeof body === 'object' ? (body as { reason?: string; message?: string }) : {};
  const message = status.message ?? (typeof body === 'string' && body ? body : `HTTP ${code}`);
  return new KubeApiError(code, status.reason ?? String(code), `${what}: ${message}`, error);
}

const describe = (ref: { kind?: string; namespace?: string; name?: string }) =>
  `${ref.kind ?? 'object'} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name ?? ''}`;

/** Our custom kinds: where they live in the API. */
const CUSTOM = {
  Project: { plural: PROJECTS, namespaced: false },
  Tenant: { plural: TENANTS, namespaced: true },
} as const;
export type CustomKind = keyof typeof CUSTOM;
type CustomObject<K extends CustomKind> = K extends 'Project' ? Project : Tenant;

export interface KubeClientOptions {
  /** Called before every write; throws (NotLeaderError) when this replica may not write. */
  mayWrite?: () => void;
  /** Called for every write sent to the API server. */
  onWrite?: (verb: WriteVerb, kind: string) => void;
  /** Called for every 409 the API server answers a write with. */
  onConflict?: (kind: string) => void;
  /** Called for every read (get or list) sent to the API server; cache hits are not. */
  onRead?: (kind: string) => void;
  /** The watch caches getCached and listCached answer from when they can (./owned.ts). */
  cache?: ObjectCache;
}

/** What the client asks of a cache: an object or a list, or undefined when the cache cannot say. */
export interface ObjectCache {
  get<T extends k8s.KubernetesObject>(ref: ObjectRef): T | undefined;
  list<T extends k8s.KubernetesObject>(apiVersion: string, kind: string, namespace: string | undefined, labelSelector?: string): T[] | undefined;
}

export class KubeClient {
  readonly objects: k8s.KubernetesObjectApi;
  readonly custom: k8s.CustomObjectsApi;
  readonly coordination: k8s.CoordinationV1Api;

  constructor(
    readonly kubeConfig: k8s.KubeConfig,
    private readonly options: KubeClientOptions = {},
  ) {
    this.objects = k8s.KubernetesObjectApi.makeApiClient(kubeConfig);
    this.custom = kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    this.coordination = kubeConfig.makeApiClient(k8s.CoordinationV1Api);
  }

  /** A client with the same connection whose writes pass another guard (the leader elector writes without one). */
  withOptions(options: KubeClientOptions): KubeClient {
    return new KubeClient(this.kubeConfig, { ...this.options, ...options });
  }

  // -------------------------------------------------------------------------------------------------------------
  // Built-in objects

  /** The object as stored now, from the API server; null when absent. */
  async get<T extends k8s.KubernetesObject>(ref: ObjectRef): Promise<T | null> {
    this.options.onRead?.(ref.kind);
    try {
      return await this.objects.read<T>({ apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) } });
    } catch (error) {
      const failure = toKubeError(error, `reading ${describe(ref)}`);
      if (isNotFound(failure)) return null;
      throw failure;
    }
  }

  /**
   * The object from the watch cache when it holds it (possibly one event behind), else from the API server: for an
   * object the operator made and is about to compare with what it wants.
   */
  async getCached<T extends k8s.KubernetesObject>(ref: ObjectRef): Promise<T | null> {
    return this.options.cache?.get<T>(ref) ?? this.get<T>(ref);
  }

  async list<T extends k8s.KubernetesObject>(apiVersion: string, kind: string, namespace: string | undefined, labelSelector?: string): Promise<T[]> {
    this.options.onRead?.(kind);
    try {
      const list = await this.objects.list<T>(apiVersion, kind, namespace, undefined, undefined, undefined, undefined, labelSelector);
      return list.items;
    } catch (error) {
      const failure = toKubeError(error, `listing ${kind} in ${namespace ?? 'the cluster'}`);
      // A namespace that is gone holds nothing.
      if (isNotFound(failure)) return [];
      throw failure;
    }
  }

  /** Like list, from the watch cache when it can answer (a kind it watches, synced, an equality selector). */
  async listCached<T extends k8s.KubernetesObject>(apiVersion: string, kind: string, namespace: string | undefined, labelSelector?: string): Promise<T[]> {
    return this.options.cache?.list<T>(apiVersion, kind, namespace, labelSelector) ?? this.list<T>(apiVersion, kind, namespace, labelSelector);
  }

  async create<T extends k8s.KubernetesObject>(object: T): Promise<T> {
    return this.write('create', object.kind ?? 'object', describe({ ...object, ...object.metadata }), () => this.objects.create(object, undefined, undefined, FIELD_MANAGER));
  }

  /** Server-side apply, taking ownership of every field we send (force), creating the object when absent. */
  async apply<T extends k8s.KubernetesObject>(object: T): Promise<T> {
    return this.write('apply', object.kind ?? 'object', describe({ ...object, ...object.metadata }), () =>
      this.objects.patch(object, undefined, undefined, FIELD_MANAGER, true, k8s.PatchStrategy.ServerSideApply),
    );
  }

  /** Deletes in the background (dependents go after); false when it was already gone. */
  async delete(ref: ObjectRef): Promise<boolean> {
    try {
      await this.write('delete', ref.kind, describe(ref), () =>
        this.objects.delete(
          { apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) } },
          undefined,
          undefined,
          undefined,
          undefined,
          'Background',
        ),
      );
      return true;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Projects and Tenants

  async getCustom<K extends CustomKind>(kind: K, name: string, namespace?: string): Promise<CustomObject<K> | null> {
    const { plural, namespaced } = CUSTOM[kind];
    this.options.onRead?.(kind);
    try {
      const found = namespaced
        ? await this.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, plural, namespace: namespace!, name })
        : await this.custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural, name });
      return found as CustomObject<K>;
    } catch (error) {
      const failure = toKubeError(error, `reading ${describe({ kind, namespace, name })}`);
      if (isNotFound(failure)) return null;
      throw failure;
    }
  }

  async listCustom<K extends CustomKind>(kind: K, namespace?: string): Promise<CustomObject<K>[]> {
    const { plural } = CUSTOM[kind];
    this.options.onRead?.(kind);
    try {
      const list = (namespace
        ? await this.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, plural, namespace })
        : await this.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural })) as { items: CustomObject<K>[] };
      return list.items;
    } catch (error) {
      throw toKubeError(error, `listing ${plural}`);
    }
  }

  /**
   * A JSON merge patch of metadata. With `resourceVersion` set in the patch, the API server answers 409 when the
   * object changed since it was read: optimistic concurrency for lists such as finalizers.
   */
  async patchCustomMetadata<K extends CustomKind>(kind: K, object: CustomObject<K>, metadata: Record<string, unknown>): Promise<CustomObject<K>> {
    const { plural, namespaced } = CUSTOM[kind];
    const { name, namespace } = object.metadata;
    const body = { metadata };
    const asMergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
    return this.write('patch', kind, describe({ kind, namespace, name }), async () =>
      (namespaced
        ? await this.custom.patchNamespacedCustomObject({ group: GROUP, version: VERSION, plural, namespace: namespace!, name, body }, asMergePatch)
        : await this.custom.patchClusterCustomObject({ group: GROUP, version: VERSION, plural, name, body }, asMergePatch)) as CustomObject<K>,
    );
  }

  /** Replaces the status subresource; the object's resourceVersion makes a stale write fail with 409. */
  async replaceStatus<K extends CustomKind>(kind: K, object: CustomObject<K>): Promise<CustomObject<K>> {
    const { plural, namespaced } = CUSTOM[kind];
    const { name, namespace } = object.metadata;
    return this.write('update_status', kind, describe({ kind, namespace, name }), async () =>
      (namespaced
        ? await this.custom.replaceNamespacedCustomObjectStatus({ group: GROUP, version: VERSION, plural, namespace: namespace!, name, body: object, fieldManager: FIELD_MANAGER })
        : await this.custom.replaceClusterCustomObjectStatus({ group: GROUP, version: VERSION, plural, name, body: object, fieldManager: FIELD_MANAGER })) as CustomObject<K>,
    );
  }

  /** Marks the object for deletion (its finalizers then run); false when it was already gone. */
  async deleteCustom(kind: CustomKind, name: string, namespace?: string): Promise<boolean> {
    const { plural, namespaced } = CUSTOM[kind];
    try {
      await this.write('delete', kind, describe({ kind, namespace, name }), () =>
        namespaced
          ? this.custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, plural, namespace: namespace!, name })
          : this.custom.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural, name }),
      );
      return true;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  private async write<T>(verb: WriteVerb, kind: string, what: string, send: () => Promise<T>): Promise<T> {
    this.options.mayWrite?.();
    this.options.onWrite?.(verb, kind);
    try {
      return await send();
    } catch (error) {
      const failure = toKubeError(error, `${verb === 'update_status' ? 'writing the status of' : `${verb} of`} ${what}`);
      if (isConflict(failure)) this.options.onConflict?.(kind);
      throw failure;
    }
  }
}
