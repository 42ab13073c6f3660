// The operator's read side for what it makes: one watch (and so one cache) per kind of object a Project owns,
// selected by the managed-by label, as controller-runtime's cached client does. Reconcilers read a Project's
// namespace, Secret, Deployment and other objects here instead of with a GET per object and pass, so a resync of a
// steady Project reads none of them from the API server, and a burst of new Projects costs the API server a watch
// event per object instead of dozens of GETs and LISTs per pass.
//
// A miss is not an answer: the object may carry no label of ours (a namespace an admin made ahead of the operator,
// adopted on the first pass) or be newer than the cache, so KubeClient.read falls through to the API server. A hit
// can be one watch event behind; every write is an idempotent server-side apply and the event that follows wakes the
// Project again, so the worst a stale hit costs is one write that changes nothing.
import * as k8s from '@kubernetes/client-node';
import { LABELS, MANAGED_BY } from '@agentplane/lib/kubernetes/resources';
import type { Logger } from '@agentplane/lib/logging';
import type { ObjectCache, ObjectRef } from './client.js';
import { ObjectWatch } from './watch.js';

/** One kind the cache watches: where it lives in the API. */
export interface CachedKind {
  apiVersion: string;
  kind: string;
  plural: string;
}

export type OwnedChange = (kind: string, object: k8s.KubernetesObject, event: 'add' | 'update' | 'delete') => void;

/** Every kind cached is selected by this label: what the operator made, and nothing else it could see. */
export const OWNED_SELECTOR = `${LABELS.managedBy}=${MANAGED_BY}`;

const kindKey = (apiVersion: string, kind: string) => `${apiVersion}/${kind}`;

/**
 * An equality-only label selector (`a=b,c=d`) as pairs; undefined for anything else (set-based terms, `!=`), which the
 * cache leaves to the API server.
 */
export function equalitySelector(selector: string | undefined): Array<[string, string]> | undefined {
  if (!selector) return [];
  const pairs: Array<[string, string]> = [];
  for (const term of selector.split(',')) {
    const match = /^\s*([^=!\s]+)\s*==?\s*([^=!\s]*)\s*$/.exec(term);
    if (!match) return undefined;
    pairs.push([match[1]!, match[2]!]);
  }
  return pairs;
}

export class OwnedObjectCache implements ObjectCache {
  private readonly byKind = new Map<string, ObjectWatch<k8s.KubernetesObject>>();

  constructor(kubeConfig: k8s.KubeConfig, kinds: readonly CachedKind[], logger: Logger, onChange: OwnedChange = () => {}) {
    const objects = k8s.KubernetesObjectApi.makeApiClient(kubeConfig);
    for (const { apiVersion, kind, plural } of kinds) {
      const root = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
      this.byKind.set(
        kindKey(apiVersion, kind),
        new ObjectWatch(
          kubeConfig,
          {
            name: plural,
            path: `${root}/${plural}`,
            labelSelector: OWNED_SELECTOR,
            // Every namespace: a namespaced kind listed without one lists them all.
            list: () => objects.list(apiVersion, kind, undefined, undefined, undefined, undefined, undefined, OWNED_SELECTOR),
            onChange: (object, event) => onChange(kind, object, event),
          },
          logger,
        ),
      );
    }
  }

  get watches(): ObjectWatch<k8s.KubernetesObject>[] {
    return [...this.byKind.values()];
  }

  /** The object as last watched; undefined when this cache cannot say (kind not cached, not synced, or not seen). */
  get<T extends k8s.KubernetesObject>(ref: ObjectRef): T | undefined {
    const watch = this.byKind.get(kindKey(ref.apiVersion, ref.kind));
    if (!watch?.synced) return undefined;
    return watch.get(ref.name, ref.namespace) as T | undefined;
  }

  /**
   * The objects of a kind in a namespace whose labels match an equality selector; undefined when this cache cannot
   * say (kind not cached or not synced, or a selector it does not evaluate).
   */
  list<T extends k8s.KubernetesObject>(apiVersion: string, kind: string, namespace: string | undefined, labelSelector?: string): T[] | undefined {
    const watch = this.byKind.get(kindKey(apiVersion, kind));
    const pairs = equalitySelector(labelSelector);
    if (!watch?.synced || !pairs) return undefined;
    return watch.list(namespace).filter((object) => pairs.every(([key, value]) => object.metadata?.labels?.[key] === value)) as T[];
  }
}
