// The one finalizer helper for Projects and Tenants: add ours with a patch that carries the resourceVersion read
// (so a concurrent change to the list is never lost), and remove it only after the erase reports done. A 409
// re-reads the object and tries again.
import type { Project, Tenant } from '@agentplane/lib/kubernetes/resources';
import { isConflict, isNotFound, type CustomKind, type KubeClient } from './kube/client.js';

type ObjectOf<K extends CustomKind> = K extends 'Project' ? Project : Tenant;

const MAX_ATTEMPTS = 8;

export const hasFinalizer = (object: Project | Tenant, finalizer: string): boolean => (object.metadata.finalizers ?? []).includes(finalizer);

/** Changes the finalizer list at the read resourceVersion, re-reading on conflict; null when the object is gone. */
async function changeFinalizers<K extends CustomKind>(
  kube: KubeClient,
  kind: K,
  object: ObjectOf<K>,
  done: (object: ObjectOf<K>) => boolean,
  change: (finalizers: string[]) => string[],
): Promise<ObjectOf<K> | null> {
  let current: ObjectOf<K> | null = object;
  for (let attempt = 1; current; attempt += 1) {
    if (done(current)) return current;
    try {
      return (await kube.patchCustomMetadata(kind, current as never, {
        resourceVersion: current.metadata.resourceVersion,
        finalizers: change(current.metadata.finalizers ?? []),
      })) as ObjectOf<K>;
    } catch (error) {
      if (isNotFound(error)) return null;
      if (!isConflict(error) || attempt >= MAX_ATTEMPTS) throw error;
      current = (await kube.getCustom(kind, current.metadata.name, current.metadata.namespace)) as ObjectOf<K> | null;
    }
  }
  return null;
}

/** Adds the finalizer unless present (no write then). Not while the object is being deleted: the API refuses that. */
export function ensureFinalizer<K extends CustomKind>(kube: KubeClient, kind: K, object: ObjectOf<K>, finalizer: string): Promise<ObjectOf<K> | null> {
  return changeFinalizers(kube, kind, object, (o) => hasFinalizer(o, finalizer) || Boolean(o.metadata.deletionTimestamp), (list) => [...list, finalizer]);
}

export type EraseProgress = { done: true } | { done: false; requeueAfterMs?: number };

/**
 * Runs `erase` for an object being deleted and removes the finalizer once it reports done; until then the object
 * stays (and the caller requeues). Returns the erase's progress; `done` also when the finalizer was already gone.
 */
export async function finalize<K extends CustomKind>(
  kube: KubeClient,
  kind: K,
  object: ObjectOf<K>,
  finalizer: string,
  erase: (object: ObjectOf<K>) => Promise<EraseProgress>,
): Promise<EraseProgress> {
  if (!hasFinalizer(object, finalizer)) return { done: true };
  const progress = await erase(object);
  if (!progress.done) return progress;
  // The erase may have written status: remove from a fresh read.
  const fresh = (await kube.getCustom(kind, object.metadata.name, object.metadata.namespace)) as ObjectOf<K> | null;
  if (fresh) await changeFinalizers(kube, kind, fresh, (o) => !hasFinalizer(o, finalizer), (list) => list.filter((f) => f !== finalizer));
  return progress;
}
