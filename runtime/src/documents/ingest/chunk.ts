// Chunks a parsed document by its structure first, then by size in tokens (docs/decisions/0040): a chunk never
// spans two sections, so it keeps one heading path (and page), and within a section it gathers whole paragraphs up
// to the budget; a paragraph above the budget is cut at sentence ends, and a sentence above it at token bounds.
// Each chunk is a span of the parsed text (`text.slice(start, end)`), so a citation points back to its place; the
// next chunk of a section begins with the last unit of the one before when that unit is short (the overlap), so a
// fact cut at a boundary is still whole in one of them.
import { countTokens, decode, encode, isWithinTokenLimit } from 'gpt-tokenizer';
import type { ParsedDocument } from './parse.js';

export interface Chunk {
  ordinal: number;
  text: string;
  headingPath: string[];
  start: number;
  end: number;
  page: number | null;
  tokens: number;
}

export interface ChunkOptions {
  /** The most tokens in one chunk. */
  maxTokens: number;
  /** A unit this short (or shorter) at the end of a chunk starts the next one too. */
  overlapTokens: number;
}

export const DEFAULT_CHUNKING: ChunkOptions = { maxTokens: 400, overlapTokens: 60 };

/** A span of the text that chunking does not cut: a paragraph, a sentence, or a run of tokens. */
interface Unit {
  start: number;
  end: number;
  tokens: number;
}

export function chunkDocument(document: ParsedDocument, options: ChunkOptions = DEFAULT_CHUNKING): Chunk[] {
  const chunks: Chunk[] = [];
  for (const section of document.sections) {
    const units = unitsOf(document.text, section.start, section.end, options.maxTokens);
    let current: Unit[] = [];
    let tokens = 0;
    const emit = () => {
      const start = current[0]!.start;
      const end = current.at(-1)!.end;
      chunks.push({ ordinal: chunks.length, text: document.text.slice(start, end), headingPath: section.headingPath, start, end, page: section.page, tokens });
    };
    for (const unit of units) {
      if (current.length > 0 && tokens + unit.tokens > options.maxTokens) {
        emit();
        const last = current.at(-1)!;
        // The overlap: a short last unit starts the next chunk too, unless the two would not fit together.
        const overlap = current.length > 1 && last.tokens <= options.overlapTokens && last.tokens + unit.tokens <= options.maxTokens;
        current = overlap ? [last] : [];
        tokens = overlap ? last.tokens : 0;
      }
      current.push(unit);
      tokens += unit.tokens;
    }
    if (current.length > 0) emit();
  }
  return chunks;
}

/** The section's text as units of at most `maxTokens`, blank space between them left out. */
function unitsOf(text: string, start: number, end: number, maxTokens: number): Unit[] {
  const units: Unit[] = [];
  for (const paragraph of spans(text, start, end, /\n\s*\n/g)) {
    const body = text.slice(paragraph.start, paragraph.end);
    // Most paragraphs fit: one bounded count, which stops early for long ones. A paragraph this long never fits in
    // practice, and counting it would cost what tokenRuns avoids: it goes to sentences.
    const fits = body.length <= countable(maxTokens) && isWithinTokenLimit(body, maxTokens);
    if (fits !== false) {
      units.push({ ...paragraph, tokens: fits });
      continue;
    }
    for (const sentence of spans(text, paragraph.start, paragraph.end, /(?<=[.!?。！？])\s+/g)) {
      // A sentence far longer than a chunk is cut without counting it whole first (see tokenRuns).
      if (sentence.end - sentence.start > countable(maxTokens)) {
        units.push(...tokenRuns(text, sentence.start, sentence.end, maxTokens));
        continue;
      }
      const count = countTokens(text.slice(sentence.start, sentence.end));
      if (count <= maxTokens) units.push({ ...sentence, tokens: count });
      else units.push(...tokenRuns(text, sentence.start, sentence.end, maxTokens));
    }
  }
  return units;
}

/** Spans of `text[start, end)` between matches of `separator`, trimmed of surrounding whitespace, none empty. */
function spans(text: string, start: number, end: number, separator: RegExp): { start: number; end: number }[] {
  const body = text.slice(start, end);
  const found: { start: number; end: number }[] = [];
  let from = 0;
  const push = (to: number) => {
    const piece = body.slice(from, to);
    const lead = piece.length - piece.trimStart().length;
    const trail = piece.length - piece.trimEnd().length;
    if (piece.trim() !== '') found.push({ start: start + from + lead, end: start + to - trail });
  };
  for (const match of body.matchAll(separator)) {
    push(match.index);
    from = match.index + match[0].length;
  }
  push(body.length);
  return found;
}

/**
 * A text too long for one chunk even as a sentence: cut into runs of at most `maxTokens` tokens, on character
 * bounds. The tokenizer's merge step is quadratic in the length of one word, so a text without spaces (a 5 MB line
 * of one letter, base64) would hold the process for hours: it is encoded in windows of a few thousand characters,
 * cut at a space where one is near, and each window's runs are units of their own.
 */
function tokenRuns(text: string, start: number, end: number, maxTokens: number): Unit[] {
  const runs: Unit[] = [];
  const window = Math.min(4 * maxTokens, MAX_WINDOW_CHARS);
  for (let from = start; from < end; ) {
    const to = windowEnd(text, from, end, window);
    const tokens = encode(text.slice(from, to));
    let offset = from;
    for (let i = 0; i < tokens.length; i += maxTokens) {
      const piece = tokens.slice(i, i + maxTokens);
      // Decoding a run may end inside a character a later token completes: the span ends where the text says.
      const decoded = decode(piece);
      const length = i + maxTokens >= tokens.length ? to - offset : Math.min(decoded.replace(/\uFFFD+$/, '').length, to - offset);
      if (length <= 0) continue;
      runs.push({ start: offset, end: offset + length, tokens: piece.length });
      offset += length;
    }
    from = to;
  }
  return runs;
}

/**
 * The longest text counted whole: 16 characters a token is far beyond prose (about 4), and the cap keeps one count
 * of a spaceless text cheap (see tokenRuns).
 */
const countable = (maxTokens: number) => Math.min(16 * maxTokens, 8_000);

/** The most characters encoded at once (see tokenRuns). */
const MAX_WINDOW_CHARS = 4_000;

/** Where a window from `from` ends: at most `size` characters on, after a space in its last quarter if there is one, never inside a surrogate pair. */
function windowEnd(text: string, from: number, end: number, size: number): number {
  if (end - from <= size) return end;
  let to = from + size;
  const space = text.slice(to - Math.floor(size / 4), to).search(/\s\S*$/);
  if (space >= 0) to = to - Math.floor(size / 4) + space + 1;
  else if (/[\uD800-\uDBFF]/.test(text[to - 1] ?? '')) to -= 1;
  return to;
}
