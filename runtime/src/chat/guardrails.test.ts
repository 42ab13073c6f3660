// The output gate of a streamed answer: whatever the chunking, no character of a match is relayed before its check
// fires, a passing answer is relayed whole and in order, and a side with a moderation model holds everything back.
import { describe, expect, it } from 'vitest';
import { compileSide } from '@agentplane/lib/guardrails';
import { HELD_CHARS, OutputGate } from './guardrails.js';

const textChecks = compileSide([
  { name: 'pii', kind: 'pii', types: ['email'] },
  { name: 'competitors', kind: 'list', words: ['Globex Corporation'] },
] as never);

/** Feeds `text` in random chunks as a model's stream; answers what was relayed, and the check that fired. */
function stream(gate: OutputGate, text: string, random: () => number): { relayed: string; fired: string | null } {
  let sofar = '';
  let relayed = '';
  for (let i = 0; i < text.length; ) {
    const size = 1 + Math.floor(random() * 12);
    sofar += text.slice(i, i + size);
    i += size;
    const verdict = gate.grow(sofar);
    if (verdict.fired !== null) return { relayed, fired: verdict.fired };
    relayed += verdict.release;
  }
  // The step's end: the whole text judged (as the engine does) before the rest is relayed.
  const atEnd = textChecks.firstFiring(sofar);
  return atEnd !== null ? { relayed, fired: atEnd } : { relayed: relayed + gate.rest(sofar), fired: null };
}

/** A small seeded generator, so a failure can be replayed. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

const words = (count: number, random: () => number) =>
  Array.from({ length: count }, () => ['the', 'answer', 'is', 'here', 'and', 'there', 'with', 'some', 'detail'][Math.floor(random() * 9)]).join(' ');

describe('OutputGate', () => {
  it('never relays a character of a match before its check fires, however the answer is chunked', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const random = seeded(seed);
      const match = seed % 2 === 0 ? 'jane.doe@example.com' : 'Globex Corporation';
      const before = words(Math.floor(random() * 300), random);
      const text = `${before} ${match} ${words(Math.floor(random() * 100), random)}`;
      const { relayed, fired } = stream(new OutputGate(textChecks), text, random);
      // Judged as it grows, or at the latest by the final judgement of the whole text.
      expect(fired).toBe(seed % 2 === 0 ? 'pii' : 'competitors');
      expect(relayed.length, `seed ${seed}`).toBeLessThanOrEqual(before.length + 1);
      expect(relayed).not.toContain(match.slice(0, 4));
    }
  });

  it('relays a passing answer whole and in order, most of it before the end', () => {
    const random = seeded(7);
    const text = words(2_000, random);
    const gate = new OutputGate(textChecks);
    let sofar = '';
    let beforeEnd = '';
    for (let i = 0; i < text.length; i += 5) {
      sofar = text.slice(0, i + 5);
      beforeEnd += gate.grow(sofar).release;
    }
    expect(beforeEnd + gate.rest(sofar)).toBe(text);
    expect(beforeEnd.length).toBeGreaterThan(text.length - HELD_CHARS - text.length / 8 - 1);
    expect(gate.shown(text)).toBe(text);
  });

  it('does not fire on a listed word cut mid-way by a chunk', () => {
    const gate = new OutputGate(compileSide([{ name: 'words', kind: 'list', words: ['ass'] }] as never));
    const text = `${'an '.repeat(40)}assistant ${'an '.repeat(40)}`;
    for (let end = 1; end <= text.length; end++) expect(gate.grow(text.slice(0, end)).fired).toBeNull();
  });

  it('judges a long answer a few dozen times, with or without whitespace, and relays most of it before the end', () => {
    for (const text of ['x'.repeat(100_000), words(20_000, seeded(11))]) {
      let judged = 0;
      let looked = 0;
      const counting = { ...textChecks, firstFiring: (part: string) => ((judged += 1), (looked += part.length), textChecks.firstFiring(part)) };
      const gate = new OutputGate(counting);
      let relayed = '';
      for (let end = 1; end <= text.length; end++) relayed += gate.grow(text.slice(0, end)).release;
      expect(judged).toBeLessThan(120);
      expect(looked).toBeLessThan(text.length * 12);
      expect(relayed.length).toBeGreaterThan(text.length * 0.8);
      expect(relayed + gate.rest(text)).toBe(text);
    }
  });

  it('holds everything back when a moderation model is among the checks, and never splits a surrogate pair', () => {
    const moderated = new OutputGate(compileSide([{ name: 'm', kind: 'moderation', model: 'omni-moderation-latest' }] as never));
    expect(moderated.grow(words(500, seeded(3))).release).toBe('');
    const emoji = new OutputGate(textChecks);
    const text = `${'😀 '.repeat(400)}`;
    let relayed = '';
    for (let end = 1; end <= text.length; end++) relayed += emoji.grow(text.slice(0, end)).release;
    relayed += emoji.rest(text);
    expect(relayed).toBe(text);
    expect(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(relayed)).toBe(false);
  });
});
