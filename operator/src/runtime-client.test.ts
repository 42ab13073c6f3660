import { describe, expect, it } from 'vitest';
import { readinessDetail } from './runtime-client.js';

describe('readinessDetail', () => {
  it('names the failing dependencies and their errors, without the latencies that change on every probe', () => {
    const body = (latency: number) => ({
      ready: false,
      draining: false,
      dependencies: {
        relational: { ok: true, latency_ms: latency },
        redis: { ok: false, latency_ms: latency * 3, error: 'connect ECONNREFUSED 10.0.0.7:6379' },
        blobs: { ok: false, latency_ms: latency + 1 },
      },
    });
    expect(readinessDetail(body(4))).toBe('dependencies failing: blobs: not ok; redis: connect ECONNREFUSED 10.0.0.7:6379');
    expect(readinessDetail(body(4))).toBe(readinessDetail(body(950)));
  });

  it('says when the runtime drains, and leaves bodies it does not know to the caller', () => {
    expect(readinessDetail({ ready: false, draining: true, dependencies: {} })).toBe('the runtime is draining');
    expect(readinessDetail({ detail: 'upstream connect error' })).toBeUndefined();
    expect(readinessDetail(null)).toBeUndefined();
  });
});
