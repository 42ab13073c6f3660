// The estimate a model call reserves against the project's caps before it is sent.
import { describe, expect, it } from 'vitest';
import { OUTPUT_ALLOWANCE_FLOOR, OutputAllowances, promptTokensOf } from './estimate.js';
import { MESSAGE_OVERHEAD } from './history.js';

describe('a model call\'s estimate', () => {
  it('counts the prompt from its size, calls and tool definitions included, erring high', () => {
    const english = 'The quick brown fox jumps over the lazy dog. '.repeat(20);
    // o200k counts this at 10 tokens a sentence; the estimate must not fall below what the provider will report.
    expect(promptTokensOf([{ role: 'user', content: english }])).toBeGreaterThanOrEqual(200 + MESSAGE_OVERHEAD);
    const withCall = promptTokensOf([{ role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{"order":"A-1"}' }] }]);
    expect(withCall).toBe(MESSAGE_OVERHEAD + Math.ceil('lookup{"order":"A-1"}'.length / 3));
    const tool = { name: 'lookup', description: 'Look up an order.', parameters: { type: 'object' } };
    expect(promptTokensOf([], [tool])).toBe(Math.ceil(Buffer.byteLength(JSON.stringify(tool)) / 3));
  });

  it('allows a call the most output its model wrote lately, never less than the floor, or the call\'s own bound', () => {
    const outputs = new OutputAllowances();
    expect(outputs.allowance('t1', { model: 'm' })).toBe(OUTPUT_ALLOWANCE_FLOOR);
    outputs.observe('t1', 'm', 5000);
    outputs.observe('t1', 'm', 10);
    expect(outputs.allowance('t1', { model: 'm' })).toBe(5000);
    expect(outputs.allowance('t2', { model: 'm' })).toBe(OUTPUT_ALLOWANCE_FLOOR);
    expect(outputs.allowance('t1', { model: 'm', maxOutputTokens: 64 })).toBe(64);
    // Only recent calls count: a long answer long ago stops inflating every estimate.
    for (let i = 0; i < 16; i++) outputs.observe('t1', 'm', 10);
    expect(outputs.allowance('t1', { model: 'm' })).toBe(OUTPUT_ALLOWANCE_FLOOR);
  });

  it('prices the estimate at the model\'s prices, and leaves it unpriced without them', () => {
    const outputs = new OutputAllowances();
    const messages = [{ role: 'user' as const, content: 'abc' }];
    const price = { input_per_million_usd: 1_000_000, output_per_million_usd: 2_000_000 };
    const input = MESSAGE_OVERHEAD + 1;
    expect(outputs.estimate('t', { model: 'm', price, messages })).toEqual({ tokens: input + OUTPUT_ALLOWANCE_FLOOR, costUsd: input + 2 * OUTPUT_ALLOWANCE_FLOOR });
    expect(outputs.estimate('t', { model: 'm', price: undefined, messages })).toEqual({ tokens: input + OUTPUT_ALLOWANCE_FLOOR, costUsd: null });
  });
});
