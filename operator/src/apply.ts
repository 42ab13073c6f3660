// Apply the desired set, then prune (kagent's model, STYLE.md 7). Each desired object carries a hash of itself in
// an annotation; an object whose stored hash matches is left alone, so a steady state costs reads and no writes.
// Reads come from the watch caches where they can (KubeClient.getCached). A changed or missing object is server-side applied with our field manager (force: we own these objects). Then
// objects of the project's kinds that carry its labels but are no longer desired are deleted.
import type * as k8s from '@kubernetes/client-node';
import { LABELS, MANAGED_BY, SPEC_HASH_ANNOTATION } from '@agentplane/lib/kubernetes/resources';
import type { KubeClient } from './kube/client.js';
import { specHash } from './resources/index.js';

export interface ApplyReport {
  /** Objects created or changed, as `Kind/name`. */
  applied: string[];
  unchanged: number;
  /** Owned objects deleted because they are no longer desired, as `Kind/name`. */
  pruned: string[];
}

const label = (object: k8s.KubernetesObject) => `${object.kind}/${object.metadata?.name}`;

/** The object as we write it: with the hash of everything else in it. */
export function withSpecHash<T extends k8s.KubernetesObject>(object: T): T {
  const annotations = { ...(object.metadata?.annotations ?? {}) };
  delete annotations[SPEC_HASH_ANNOTATION];
  const unhashed = { ...object, metadata: { ...object.metadata, annotations } };
  return { ...unhashed, metadata: { ...unhashed.metadata, annotations: { ...annotations, [SPEC_HASH_ANNOTATION]: specHash(unhashed) } } };
}

/**
 * Makes one desired object exist as desired, given what is stored now (null: nothing); true when that took a write.
 * For a caller that has just read the object anyway.
 */
export async function applyObject(kube: KubeClient, object: k8s.KubernetesObject, existing: k8s.KubernetesObject | null): Promise<boolean> {
  const hashed = withSpecHash(object);
  if (existing?.metadata?.annotations?.[SPEC_HASH_ANNOTATION] === hashed.metadata!.annotations![SPEC_HASH_ANNOTATION]) return false;
  await kube.apply(hashed);
  return true;
}

/** Makes each desired object exist as desired; returns which ones needed a write. */
export async function applyObjects(kube: KubeClient, desired: readonly k8s.KubernetesObject[]): Promise<Pick<ApplyReport, 'applied' | 'unchanged'>> {
  const applied: string[] = [];
  let unchanged = 0;
  for (const object of desired) {
    const existing = await kube.getCached({
      apiVersion: object.apiVersion!,
      kind: object.kind!,
      name: object.metadata!.name!,
      ...(object.metadata?.namespace ? { namespace: object.metadata.namespace } : {}),
    });
    if (await applyObject(kube, object, existing)) applied.push(label(object));
    else unchanged += 1;
  }
  return { applied, unchanged };
}

/** The label selector of everything the operator made for one project. */
export const ownedSelector = (projectName: string) => `${LABELS.project}=${projectName},${LABELS.managedBy}=${MANAGED_BY}`;

/** Deletes objects of `kinds` in `namespace` that belong to the project but are not in `desired`. */
export async function pruneObjects(
  kube: KubeClient,
  projectName: string,
  namespace: string,
  kinds: ReadonlyArray<{ apiVersion: string; kind: string }>,
  desired: readonly k8s.KubernetesObject[],
): Promise<string[]> {
  const wanted = new Set(desired.map(label));
  const pruned: string[] = [];
  for (const { apiVersion, kind } of kinds) {
    if (kind === 'Namespace') continue;
    const owned = await kube.listCached(apiVersion, kind, namespace, ownedSelector(projectName));
    for (const object of owned) {
      const name = object.metadata?.name;
      if (!name || wanted.has(`${kind}/${name}`) || object.metadata?.deletionTimestamp) continue;
      if (await kube.delete({ apiVersion, kind, name, namespace })) pruned.push(`${kind}/${name}`);
    }
  }
  return pruned;
}
