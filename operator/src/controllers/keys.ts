// Work-queue keys: `kind/namespace/name` (namespace empty for cluster-scoped kinds), one reconcile per key at a time.
export type ControllerKind = 'Project' | 'Tenant';

export const objectKey = (kind: ControllerKind, name: string, namespace = '') => `${kind}/${namespace}/${name}`;

export function parseKey(key: string): { kind: ControllerKind; namespace: string; name: string } {
  const [kind, namespace, name] = key.split('/');
  if ((kind !== 'Project' && kind !== 'Tenant') || namespace === undefined || !name) throw new Error(`not a work-queue key: ${key}`);
  return { kind, namespace, name };
}
