// Chunking: structure first (no chunk crosses a section, each keeps its heading path and page), then size (whole
// paragraphs up to the budget, long ones cut at sentences, run-on text at token bounds), every chunk an exact span
// of the parsed text, and a short last unit carried into the next chunk.
import { countTokens } from 'gpt-tokenizer';
import { describe, expect, it } from 'vitest';
import { chunkDocument } from './chunk.js';
import type { ParsedDocument } from './parse.js';

const sentence = (i: number) => `Sentence number ${i} says one plain thing about refunds.`;

describe('chunkDocument', () => {
  it('keeps sections apart and gathers whole paragraphs up to the budget', () => {
    const first = Array.from({ length: 6 }, (_, i) => `Paragraph ${i} of the guide, short.`).join('\n\n');
    const second = 'Only paragraph of the second section.';
    const text = `${first}\n\n${second}`;
    const doc: ParsedDocument = {
      text,
      sections: [
        { headingPath: ['Guide'], start: 0, end: first.length, page: 3 },
        { headingPath: ['Guide', 'More'], start: first.length + 2, end: text.length, page: 4 },
      ],
    };
    const chunks = chunkDocument(doc, { maxTokens: 25, overlapTokens: 0 });
    for (const chunk of chunks) {
      expect(chunk.text).toBe(text.slice(chunk.start, chunk.end));
      expect(chunk.tokens).toBeLessThanOrEqual(25);
      // Whole paragraphs: a chunk starts and ends at a paragraph's edge.
      expect(chunk.text.startsWith('Paragraph') || chunk.text.startsWith('Only')).toBe(true);
      expect(chunk.text.endsWith('.')).toBe(true);
    }
    expect(chunks.at(-1)).toMatchObject({ text: second, headingPath: ['Guide', 'More'], page: 4 });
    expect(chunks.slice(0, -1).every((c) => c.page === 3 && c.headingPath.join('/') === 'Guide')).toBe(true);
    expect(chunks.map((c) => c.ordinal)).toEqual(chunks.map((_, i) => i));
    // Every paragraph is in some chunk.
    for (let i = 0; i < 6; i++) expect(chunks.some((c) => c.text.includes(`Paragraph ${i} `))).toBe(true);
  });

  it('cuts a paragraph above the budget at sentence ends, and carries a short last sentence into the next chunk', () => {
    const paragraph = Array.from({ length: 30 }, (_, i) => sentence(i)).join(' ');
    const doc: ParsedDocument = { text: paragraph, sections: [{ headingPath: [], start: 0, end: paragraph.length, page: null }] };
    const chunks = chunkDocument(doc, { maxTokens: 60, overlapTokens: 15 });
    expect(chunks.length).toBeGreaterThan(5);
    for (const [i, chunk] of chunks.entries()) {
      expect(chunk.tokens).toBeLessThanOrEqual(60);
      expect(chunk.text).toMatch(/^Sentence number \d+ .*\.$/s);
      if (i > 0) {
        // The overlap: each chunk starts with the sentence the previous one ended with.
        const previousLast = chunks[i - 1]!.text.split(/(?<=\.)\s+/).at(-1)!;
        expect(chunk.text.startsWith(previousLast)).toBe(true);
      }
    }
    expect(chunks.at(-1)!.text.endsWith(sentence(29))).toBe(true);
  });

  it('cuts run-on text at token bounds, covering it whole and in order', () => {
    const runOn = 'word '.repeat(500).trim();
    const doc: ParsedDocument = { text: runOn, sections: [{ headingPath: ['Log'], start: 0, end: runOn.length, page: null }] };
    const chunks = chunkDocument(doc, { maxTokens: 100, overlapTokens: 0 });
    expect(chunks.length).toBeGreaterThanOrEqual(5);
    expect(chunks.map((c) => c.text).join('')).toBe(runOn);
    for (const chunk of chunks) expect(countTokens(chunk.text)).toBeLessThanOrEqual(101);
  });

  it('cuts a huge text without a single space (one letter, emoji) whole, in order, never inside a character', () => {
    // The tokenizer is quadratic in the length of one word: unbounded, this document held the process for hours.
    for (const runOn of ['a'.repeat(2 * 1024 * 1024), '😀'.repeat(200_000)]) {
      const doc: ParsedDocument = { text: runOn, sections: [{ headingPath: [], start: 0, end: runOn.length, page: null }] };
      const chunks = chunkDocument(doc, { maxTokens: 400, overlapTokens: 60 });
      expect(chunks.map((c) => c.text).join('')).toBe(runOn);
      for (const chunk of chunks) {
        expect(chunk.tokens).toBeLessThanOrEqual(400);
        expect(chunk.text).not.toMatch(/^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/);
      }
    }
  });

  it('makes nothing of an empty document', () => {
    expect(chunkDocument({ text: '', sections: [] })).toEqual([]);
    expect(chunkDocument({ text: '\n\n  \n', sections: [{ headingPath: [], start: 0, end: 5, page: null }] })).toEqual([]);
  });
});
