// Reads a document's bytes into plain text with its structure: the text, and the sections it falls into (heading
// path, character span, page), so a chunk and its citation can point back to their place. One reader per media
// type: text as is; Markdown by its headings (outside code fences); HTML by h1-h6 with scripts and styles dropped
// (htmlparser2); DOCX through its HTML (mammoth); PDF page by page (unpdf, PDF.js); CSV as one self-describing
// line per row (csv-parse); JSON by its top-level members. Bytes a reader cannot read fail the document with
// the reason, never the process.
import { parse as parseCsv } from 'csv-parse/sync';
import { Parser } from 'htmlparser2';
import { storableText } from '@agentplane/lib/http/text';
import type { DocumentContentType } from '../limits.js';
import { UnreadableDocument } from './unreadable.js';

export { UnreadableDocument } from './unreadable.js';

export interface Section {
  /** The headings this section is under, outermost first; empty before the first heading. */
  headingPath: string[];
  /** Its span in `ParsedDocument.text`. */
  start: number;
  end: number;
  /** 1-based, for paged formats. */
  page: number | null;
}

export interface ParsedDocument {
  text: string;
  sections: Section[];
}


export async function parseDocument(contentType: DocumentContentType, bytes: Buffer): Promise<ParsedDocument> {
  switch (contentType) {
    case 'text/plain':
      return plain(decodeText(bytes));
    case 'text/markdown':
      return markdown(decodeText(bytes));
    case 'text/html':
      return html(decodeText(bytes));
    case 'text/csv':
      return csv(decodeText(bytes));
    case 'application/json':
      return json(decodeText(bytes));
    case 'application/pdf':
      return pdf(bytes);
    case 'application/vnd.openxmlformats-officedocument.wordprocessingml.document':
      return docx(bytes);
  }
}

/** UTF-8 (a BOM dropped), with what no store takes (NUL, lone surrogates, invalid bytes) as U+FFFD. */
function decodeText(bytes: Buffer): string {
  return storableText(new TextDecoder('utf-8').decode(bytes));
}

/** Collects text and opens a section at each heading. */
class Outline {
  private parts: string[] = [];
  private length = 0;
  private readonly sections: Section[] = [];
  private readonly headings: string[] = [];
  private page: number | null = null;
  private sectionStart = 0;

  /**
   * A heading of `level` (1 outermost): the current section ends, and a new one starts with the heading's line,
   * as the source wrote it (`line`) or as its title alone.
   */
  heading(level: number, title: string, line = `${title.trim()}\n\n`): void {
    this.close();
    this.headings.length = Math.min(this.headings.length, level - 1);
    while (this.headings.length < level - 1) this.headings.push('');
    this.headings.push(title.replace(/\s+/g, ' ').trim());
    this.append(line);
  }

  /** A new page: the current section ends, and the next one is on `page`. */
  newPage(page: number): void {
    this.close();
    this.page = page;
  }

  append(text: string): void {
    if (text === '') return;
    this.parts.push(text);
    this.length += text.length;
  }

  finish(): ParsedDocument {
    this.close();
    const text = this.parts.join('');
    this.parts = [text];
    return { text, sections: this.sections };
  }

  private close(): void {
    if (this.length > this.sectionStart) {
      this.sections.push({ headingPath: this.headings.filter((h) => h !== ''), start: this.sectionStart, end: this.length, page: this.page });
    }
    this.sectionStart = this.length;
  }
}

function plain(text: string): ParsedDocument {
  const outline = new Outline();
  outline.append(text);
  return outline.finish();
}

const FENCE = /^\s{0,3}(`{3,}|~{3,})/;
const ATX = /^\s{0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;

function markdown(text: string): ParsedDocument {
  const outline = new Outline();
  let fence: string | null = null;
  for (const line of text.split(/(?<=\n)/)) {
    const opener = FENCE.exec(line);
    if (fence === null && opener) fence = opener[1]![0]!;
    else if (fence !== null && opener && opener[1]![0] === fence) fence = null;
    const heading = fence === null ? ATX.exec(line.replace(/\r?\n$/, '')) : null;
    if (heading) outline.heading(heading[1]!.length, heading[2]!, line);
    else outline.append(line);
  }
  return outline.finish();
}

/** Elements whose text is never content. */
const SKIPPED = new Set(['script', 'style', 'noscript', 'template', 'head', 'svg', 'iframe', 'object']);
/** Elements that end a line of text. */
const BLOCKS = new Set([
  'p', 'div', 'br', 'li', 'tr', 'section', 'article', 'header', 'footer', 'main', 'aside', 'nav', 'pre', 'blockquote', 'table',
  'ul', 'ol', 'dl', 'dt', 'dd', 'figure', 'figcaption', 'hr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'title', 'td', 'th',
]);

function html(source: string): ParsedDocument {
  const outline = new Outline();
  let skipping = 0;
  let heading: { level: number; text: string } | null = null;
  let pending = '';
  let afterHeading = false;
  /** Ends the line (or the paragraph, with 2): as many newlines as it takes, never more. */
  const lineBreaks = (count: number) => {
    const trailing = /\n*$/.exec(pending.replace(/[ \t]+$/, ''))![0].length;
    if (trailing < count) pending += '\n'.repeat(count - trailing);
  };
  const flush = () => {
    // Runs of whitespace inside a block are one space, as a browser shows them; a heading's line already ended.
    let text = pending.replace(/[ \t\r\f\v]+/g, ' ').replace(/ *\n */g, '\n').replace(/\n{3,}/g, '\n\n');
    if (afterHeading) text = text.replace(/^\n+/, '');
    if (text.trim() !== '') {
      outline.append(text);
      afterHeading = false;
    }
    pending = '';
  };
  const parser = new Parser(
    {
      onopentag(name) {
        if (SKIPPED.has(name)) skipping += 1;
        if (skipping > 0) return;
        const level = /^h([1-6])$/.exec(name);
        if (level) {
          flush();
          heading = { level: Number(level[1]), text: '' };
        } else if (BLOCKS.has(name)) lineBreaks(1);
      },
      ontext(text) {
        if (skipping > 0) return;
        if (heading) heading.text += text;
        else pending += text;
      },
      onclosetag(name) {
        if (SKIPPED.has(name)) {
          skipping = Math.max(0, skipping - 1);
          return;
        }
        if (skipping > 0) return;
        if (heading && /^h[1-6]$/.test(name)) {
          const title = heading.text.replace(/\s+/g, ' ').trim();
          if (title !== '') {
            outline.heading(heading.level, title);
            afterHeading = true;
          }
          heading = null;
        } else if (BLOCKS.has(name)) lineBreaks(name === 'p' || name === 'table' || name === 'ul' || name === 'ol' ? 2 : 1);
      },
    },
    { decodeEntities: true, lowerCaseTags: true },
  );
  parser.write(source);
  parser.end();
  flush();
  return outline.finish();
}

function csv(text: string): ParsedDocument {
  let rows: string[][];
  try {
    rows = parseCsv(text, { relax_column_count: true, relax_quotes: true, skip_empty_lines: true, bom: true }) as string[][];
  } catch (error) {
    throw new UnreadableDocument(`not readable as CSV: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const outline = new Outline();
  const [header, ...body] = rows;
  if (!header) return outline.finish();
  // Every row says what each of its values is, so a chunk of rows reads on its own.
  for (const row of body) {
    outline.append(`${row.map((value, i) => `${header[i] ?? `column ${i + 1}`}: ${value}`).join('; ')}\n\n`);
  }
  if (body.length === 0) outline.append(`${header.join('; ')}\n`);
  return outline.finish();
}

function json(text: string): ParsedDocument {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new UnreadableDocument(`not valid JSON: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const outline = new Outline();
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const [key, member] of Object.entries(value)) {
      outline.heading(1, key);
      outline.append(`${JSON.stringify(member, null, 2)}\n\n`);
    }
  } else if (Array.isArray(value)) {
    for (const item of value) outline.append(`${JSON.stringify(item, null, 2)}\n\n`);
  } else outline.append(JSON.stringify(value));
  return outline.finish();
}

async function pdf(bytes: Buffer): Promise<ParsedDocument> {
  if (bytes.subarray(0, 1024).indexOf('%PDF-') === -1) throw new UnreadableDocument('not a PDF: the file does not start with a PDF header');
  const { getDocumentProxy } = await import('unpdf');
  const outline = new Outline();
  try {
    // PDF.js takes (and detaches) its own copy; it reports what it mends in a file as warnings on the console,
    // which a service does not want there (verbosity 0: errors only).
    const proxy = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });
    try {
      // One page at a time, each let go once read: reading them all at once held every page's objects together
      // (a 90 MB PDF peaked at 3.9 GB).
      for (let number = 1; number <= proxy.numPages; number++) {
        const page = await proxy.getPage(number);
        const content = await page.getTextContent();
        const text = content.items.map((item) => ('str' in item ? item.str + (item.hasEOL ? '\n' : '') : '')).join('');
        page.cleanup();
        outline.newPage(number);
        outline.append(`${storableText(text).trim()}\n\n`);
      }
    } finally {
      // What PDF.js holds of the document (fonts, the parsed file) is let go now, not at some later GC.
      await proxy.loadingTask.destroy();
    }
  } catch (error) {
    throw new UnreadableDocument(`not readable as PDF: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  return outline.finish();
}

async function docx(bytes: Buffer): Promise<ParsedDocument> {
  if (bytes.length < 4 || bytes.readUInt32LE(0) !== 0x04034b50) throw new UnreadableDocument('not a DOCX file: it is not a ZIP archive');
  const mammoth = await import('mammoth');
  let converted: { value: string };
  try {
    converted = await mammoth.convertToHtml({ buffer: bytes });
  } catch (error) {
    throw new UnreadableDocument(`not readable as DOCX: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  return html(converted.value);
}
