// The feature host: what features register reaches the tenant eraser in order, timers stop at shutdown, and
// shutdown hooks run last registered first, each failure logged without stopping the rest.
import { describe, expect, it, vi } from 'vitest';
import type { Logger } from '@agentplane/lib/logging';
import { Features } from './features.js';
import type { SubjectForgetter, SubjectRows, SubjectStep } from './governance/forget.js';
import type { EraseStep, RowPurge, TenantEraser } from './tenants/erase.js';

function host() {
  const steps: EraseStep[] = [];
  const purges: RowPurge[] = [];
  const eraser = { registerStep: (step: EraseStep) => steps.push(step), registerRows: (purge: RowPurge) => purges.push(purge) } as unknown as TenantEraser;
  const logger = { warn: vi.fn(), error: vi.fn() } as unknown as Logger;
  const forgetSteps: SubjectStep[] = [];
  const forgetRows: SubjectRows[] = [];
  const forgetter = { registerStep: (step: SubjectStep) => forgetSteps.push(step), registerRows: (rows: SubjectRows) => forgetRows.push(rows) } as unknown as SubjectForgetter;
  return { features: new Features(eraser, forgetter, logger), steps, purges, forgetSteps, forgetRows, logger };
}

describe('Features', () => {
  it('hands erase steps and row purges to the eraser in registration order', () => {
    const { features, steps, purges } = host();
    const run = async () => ({});
    features.eraseStep({ name: 'a', phase: 'outside_database', run });
    features.eraseRows({ table: 'child', purge: async () => 0 });
    features.eraseStep({ name: 'b', phase: 'stop_work', run });
    features.eraseRows({ table: 'parent', purge: async () => 0 });
    expect(steps.map((step) => step.name)).toEqual(['a', 'b']);
    expect(purges.map((purge) => purge.table)).toEqual(['child', 'parent']);
  });

  it("hands a subject's forget steps and rows to the forgetter in registration order", () => {
    const { features, forgetSteps, forgetRows } = host();
    features.forgetStep({ name: 'stop', run: async () => ({}) });
    features.forgetRows({ table: 'child', purge: async () => 0 });
    features.forgetRows({ table: 'parent', purge: async () => 0 });
    expect(forgetSteps.map((step) => step.name)).toEqual(['stop']);
    expect(forgetRows.map((rows) => rows.table)).toEqual(['child', 'parent']);
  });

  it('runs shutdown hooks last registered first; a failing one is logged and the rest still run', async () => {
    const { features, logger } = host();
    const order: string[] = [];
    features.onShutdown(async () => void order.push('first'));
    features.onShutdown(async () => {
      throw new Error('boom');
    });
    features.onShutdown(async () => void order.push('last'));
    await features.shutdown();
    expect(order).toEqual(['last', 'first']);
    expect(logger.error).toHaveBeenCalledOnce();
  });

  it('runs a timer at once when asked, then on its interval, logs its failures, and stops it at shutdown', async () => {
    vi.useFakeTimers();
    try {
      const { features, logger } = host();
      let runs = 0;
      features.every('probe', 1000, async () => {
        runs += 1;
        if (runs === 2) throw new Error('flaky');
      }, { now: true });
      expect(runs).toBe(1);
      await vi.advanceTimersByTimeAsync(2000);
      expect(runs).toBe(3);
      expect(logger.warn).toHaveBeenCalledWith(expect.anything(), 'probe failed');
      await features.shutdown();
      await vi.advanceTimersByTimeAsync(5000);
      expect(runs).toBe(3);
    } finally {
      vi.useRealTimers();
    }
  });

  it('never starts a round of periodic work while the last one is still going', async () => {
    vi.useFakeTimers();
    try {
      const { features } = host();
      let started = 0;
      let release = () => {};
      features.every('slow', 100, () => {
        started += 1;
        return new Promise<void>((resolve) => (release = resolve));
      });
      await vi.advanceTimersByTimeAsync(550);
      // Five ticks came while the first round held on.
      expect(started).toBe(1);
      release();
      await vi.advanceTimersByTimeAsync(100);
      expect(started).toBe(2);
      release();
      await features.shutdown();
    } finally {
      vi.useRealTimers();
    }
  });
});
