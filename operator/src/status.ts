// The one status writer (CloudNativePG's status/patch.go): re-read the object, apply small mutators to a copy of
// its status, skip the write when nothing changed, replace the status subresource at the resourceVersion just read,
// and on 409 start over from a fresh read. With conditions whose lastTransitionTime moves only when their status
// flips, a steady state writes nothing.
import { isDeepStrictEqual } from 'node:util';
import type { Condition, Project, Tenant } from '@agentplane/lib/kubernetes/resources';
import { isConflict, type CustomKind, type KubeClient } from './kube/client.js';

/** What a step says about one condition; the writer adds lastTransitionTime and observedGeneration. */
export interface ConditionUpdate {
  type: string;
  status: Condition['status'];
  reason: string;
  message: string;
}

/** A timestamp as Kubernetes writes one: RFC 3339, whole seconds, UTC. */
export function timestamp(at: Date = new Date()): string {
  return at.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((condition) => condition.type === type);
}

/**
 * The conditions with `update` set: its lastTransitionTime is kept while the status stays the same (only reason,
 * message or generation change), and is now when the status flips or the condition is new.
 */
export function setCondition(conditions: readonly Condition[] | undefined, update: ConditionUpdate, generation?: number, now: Date = new Date()): Condition[] {
  const existing = findCondition(conditions, update.type);
  const next: Condition = {
    type: update.type,
    status: update.status,
    reason: update.reason,
    message: update.message,
    lastTransitionTime: existing && existing.status === update.status ? existing.lastTransitionTime : timestamp(now),
    ...(generation === undefined ? {} : { observedGeneration: generation }),
  };
  return existing ? (conditions ?? []).map((condition) => (condition.type === update.type ? next : condition)) : [...(conditions ?? []), next];
}

type StatusOf<K extends CustomKind> = K extends 'Project' ? NonNullable<Project['status']> : NonNullable<Tenant['status']>;
type ObjectOf<K extends CustomKind> = K extends 'Project' ? Project : Tenant;

/** Changes `status` in place; it sees the freshly read object (for its generation). */
export type StatusMutator<K extends CustomKind> = (status: StatusOf<K>, object: ObjectOf<K>) => void;

export interface StatusWriteResult<K extends CustomKind> {
  written: boolean;
  /** The object as stored after the write (or as read, when nothing was written). */
  object: ObjectOf<K>;
  /** 409s met (and retried) on the way. */
  conflicts: number;
}

const MAX_ATTEMPTS = 8;

/** A JSON copy: undefined members disappear, as they would on the wire, so comparisons see what is stored. */
const plain = <T>(value: T): T => JSON.parse(JSON.stringify(value ?? {})) as T;

/**
 * Applies `mutators` to the object's status and writes it if that changed anything; null when the object is gone.
 * `read` is the object as the caller's pass read it, if it did: the first attempt starts from it instead of a read
 * of its own (only the leading operator writes these statuses, so it lacks nothing but this pass's own writes, and a
 * write from a stale copy is refused with 409 and retried from a fresh read).
 */
export async function writeStatus<K extends CustomKind>(
  kube: KubeClient,
  kind: K,
  name: string,
  namespace: string | undefined,
  mutators: ReadonlyArray<StatusMutator<K>>,
  read?: ObjectOf<K>,
): Promise<StatusWriteResult<K> | null> {
  let conflicts = 0;
  for (let attempt = 1; ; attempt += 1) {
    const object = attempt === 1 && read ? read : ((await kube.getCustom(kind, name, namespace)) as ObjectOf<K> | null);
    if (!object) return null;
    const before = plain(object.status) as StatusOf<K>;
    const after = plain(before);
    for (const mutate of mutators) mutate(after, object);
    const desired = plain(after);
    if (isDeepStrictEqual(before, desired)) return { written: false, object, conflicts };
    try {
      const stored = (await kube.replaceStatus(kind, { ...object, status: desired } as never)) as ObjectOf<K>;
      return { written: true, object: stored, conflicts };
    } catch (error) {
      if (!isConflict(error) || attempt >= MAX_ATTEMPTS) throw error;
      conflicts += 1;
    }
  }
}
