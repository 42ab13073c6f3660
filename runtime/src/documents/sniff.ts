// Whether a document's first bytes are what its declared media type says (docs/decisions/0039): a PDF starts with
// its `%PDF-` header, a DOCX is a ZIP archive, and text is not binary. A mislabelled upload is refused at complete
// (or inline) with the field named, instead of failing later in the ingest with a parser's error.
import type { DocumentContentType } from './limits.js';

/** How many leading bytes are looked at. */
export const SNIFF_BYTES = 8 * 1024;

const PDF = Buffer.from('%PDF-');
const ZIP = Buffer.from([0x50, 0x4b, 0x03, 0x04]);

/** Why `head` (the first bytes of the file) is not a `contentType` file; undefined when it may well be one. */
export function contentMismatch(contentType: DocumentContentType | string, head: Buffer): string | undefined {
  const looksPdf = head.subarray(0, 1024).includes(PDF);
  const looksZip = head.subarray(0, 4).equals(ZIP);
  if (contentType === 'application/pdf') return looksPdf ? undefined : `it does not start as a PDF does (no %PDF- header), but ${contentType} was declared`;
  if (contentType === 'application/vnd.openxmlformats-officedocument.wordprocessingml.document') {
    return looksZip ? undefined : 'it is not a ZIP archive, as every DOCX file is';
  }
  if (looksPdf) return `it is a PDF, but ${contentType} was declared: declare application/pdf`;
  if (looksZip) return `it is a ZIP archive (a DOCX or other binary file), but ${contentType} was declared`;
  if (head.includes(0)) return `it holds NUL bytes, which no ${contentType} text does: it looks like a binary file`;
  return undefined;
}
