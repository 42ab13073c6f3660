import { describe, expect, it } from 'vitest';
import { setCondition, timestamp } from './status.js';

describe('setCondition', () => {
  const t0 = new Date('2030-01-01T00:00:00.250Z');
  const t1 = new Date('2030-01-01T00:05:00Z');

  it('adds a new condition stamped now, in whole seconds', () => {
    const conditions = setCondition(undefined, { type: 'Ready', status: 'False', reason: 'Provisioning', message: 'starting' }, 3, t0);
    expect(conditions).toEqual([{ type: 'Ready', status: 'False', reason: 'Provisioning', message: 'starting', lastTransitionTime: '2030-01-01T00:00:00Z', observedGeneration: 3 }]);
  });

  it('keeps lastTransitionTime while the status stays, and moves it when the status flips', () => {
    const first = setCondition(undefined, { type: 'Ready', status: 'False', reason: 'Provisioning', message: 'starting' }, 1, t0);
    const same = setCondition(first, { type: 'Ready', status: 'False', reason: 'RuntimeNotReady', message: 'not yet' }, 2, t1);
    expect(same[0]).toMatchObject({ reason: 'RuntimeNotReady', message: 'not yet', observedGeneration: 2, lastTransitionTime: timestamp(t0) });
    const flipped = setCondition(same, { type: 'Ready', status: 'True', reason: 'RuntimeReady', message: 'serving' }, 2, t1);
    expect(flipped[0]!.lastTransitionTime).toBe(timestamp(t1));
  });

  it('replaces a condition in place and leaves the others alone', () => {
    let conditions = setCondition(undefined, { type: 'NamespaceReady', status: 'True', reason: 'NamespaceReady', message: 'ok' }, 1, t0);
    conditions = setCondition(conditions, { type: 'Ready', status: 'False', reason: 'Provisioning', message: 'starting' }, 1, t0);
    const updated = setCondition(conditions, { type: 'NamespaceReady', status: 'False', reason: 'ApplyFailed', message: 'no' }, 1, t1);
    expect(updated.map((c) => c.type)).toEqual(['NamespaceReady', 'Ready']);
    expect(updated[1]).toBe(conditions[1]);
    expect(conditions[0]!.status).toBe('True');
  });
});
