import { describe, expect, it } from 'vitest';
import type { TenantEraseReport } from '@agentplane/lib/kubernetes/resources';
import { keepingErasedAt } from './erase.js';

const failedBlobs = (erasedAt: string): TenantEraseReport => ({
  complete: false,
  erasedAt,
  rowsDeleted: { sessions: 3 },
  steps: [
    { step: 'rows', phase: 'rows', outcome: 'done', items: 3 },
    { step: 'blobs', phase: 'outside_database', outcome: 'failed', error: 'the S3 endpoint did not answer' },
  ],
});

describe('keepingErasedAt', () => {
  it('keeps the recorded report when the runtime reports the same steps again at another time', () => {
    const recorded = failedBlobs('2026-11-24T10:00:00Z');
    expect(keepingErasedAt(recorded, failedBlobs('2026-11-24T10:00:07Z'))).toBe(recorded);
  });

  it('takes the new report when anything but its time changed, or when none was recorded', () => {
    const recorded = failedBlobs('2026-11-24T10:00:00Z');
    const completed: TenantEraseReport = { ...failedBlobs('2026-11-24T10:05:00Z'), complete: true, steps: [{ step: 'blobs', phase: 'outside_database', outcome: 'done' }] };
    expect(keepingErasedAt(recorded, completed)).toBe(completed);
    const otherError = failedBlobs('2026-11-24T10:00:07Z');
    otherError.steps[1]!.error = 'access denied';
    expect(keepingErasedAt(recorded, otherError)).toBe(otherError);
    const fresh = failedBlobs('2026-11-24T10:00:07Z');
    expect(keepingErasedAt(undefined, fresh)).toBe(fresh);
  });
});
