// Each format read into text and sections: headings and their paths, pages, rows that describe themselves, text a
// store cannot take made safe, and bytes that are not what they claim failing with the reason. The PDF and DOCX
// files are built byte by byte (test/fakes/documents.ts), so the real readers (PDF.js, mammoth) read real files.
import { describe, expect, it } from 'vitest';
import { minimalDocx, minimalPdf, zip } from '@agentplane/test/fakes/documents';
import { parseDocument, UnreadableDocument, type ParsedDocument } from './parse.js';

const sectionTexts = (doc: ParsedDocument) => doc.sections.map((s) => ({ path: s.headingPath, page: s.page, text: doc.text.slice(s.start, s.end).trim() }));

describe('parseDocument', () => {
  it('reads plain text as one section, with text no store takes made safe and a BOM dropped', async () => {
    const doc = await parseDocument('text/plain', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('hello\u0000 world\n'), Buffer.from([0xff])]));
    expect(doc.text).toBe('hello\uFFFD world\n\uFFFD');
    expect(doc.sections).toEqual([{ headingPath: [], start: 0, end: doc.text.length, page: null }]);
  });

  it('reads Markdown by its headings, nested, and not by a # inside a code fence', async () => {
    const source = ['Intro line.', '', '# Guide', 'Welcome.', '', '## Install', 'Run it.', '```sh', '# not a heading', '```', '### Linux', 'apt.', '## Use', 'Ask.', '# Appendix ##', 'End.'].join('\n');
    const doc = await parseDocument('text/markdown', Buffer.from(source));
    // The text is the upload itself, so offsets point into the file as the customer has it.
    expect(doc.text).toBe(source);
    expect(sectionTexts(doc)).toEqual([
      { path: [], page: null, text: 'Intro line.' },
      { path: ['Guide'], page: null, text: '# Guide\nWelcome.' },
      { path: ['Guide', 'Install'], page: null, text: '## Install\nRun it.\n```sh\n# not a heading\n```' },
      { path: ['Guide', 'Install', 'Linux'], page: null, text: '### Linux\napt.' },
      { path: ['Guide', 'Use'], page: null, text: '## Use\nAsk.' },
      { path: ['Appendix'], page: null, text: '# Appendix ##\nEnd.' },
    ]);
  });

  it('reads HTML by h1-h6, as a browser shows the text, without scripts, styles or the head', async () => {
    const source = `<!doctype html><html><head><title>T</title><style>p{}</style></head><body>
      <h1>Policies</h1><p>All   staff &amp; contractors.</p><script>alert(1)</script>
      <h2>Refunds <small>(EU)</small></h2><ul><li>30 days</li><li>receipt</li></ul></body></html>`;
    const doc = await parseDocument('text/html', Buffer.from(source));
    expect(sectionTexts(doc)).toEqual([
      { path: ['Policies'], page: null, text: 'Policies\n\nAll staff & contractors.' },
      { path: ['Policies', 'Refunds (EU)'], page: null, text: 'Refunds (EU)\n\n30 days\nreceipt' },
    ]);
    expect(doc.text).not.toContain('alert');
  });

  it('reads CSV as one line per row that names each value', async () => {
    const doc = await parseDocument('text/csv', Buffer.from('name,plan\n"Ada, L.",pro\nBob,free,extra\n'));
    expect(doc.text).toBe('name: Ada, L.; plan: pro\n\nname: Bob; plan: free; column 3: extra\n\n');
  });

  it('reads JSON by its top-level members, and fails on what is not JSON', async () => {
    const doc = await parseDocument('application/json', Buffer.from('{"refunds":{"days":30},"support":"email"}'));
    expect(sectionTexts(doc)).toEqual([
      { path: ['refunds'], page: null, text: 'refunds\n\n{\n  "days": 30\n}' },
      { path: ['support'], page: null, text: 'support\n\n"email"' },
    ]);
    await expect(parseDocument('application/json', Buffer.from('{"a":'))).rejects.toBeInstanceOf(UnreadableDocument);
  });

  it('reads a PDF page by page', async () => {
    const doc = await parseDocument('application/pdf', minimalPdf(['Refunds take 30 days.', 'Support answers by email.']));
    expect(sectionTexts(doc)).toEqual([
      { path: [], page: 1, text: 'Refunds take 30 days.' },
      { path: [], page: 2, text: 'Support answers by email.' },
    ]);
  });

  it('reads a DOCX by its heading styles', async () => {
    const doc = await parseDocument('application/vnd.openxmlformats-officedocument.wordprocessingml.document', minimalDocx(['# Handbook', 'Be kind.', '## Leave', '25 days a year.']));
    expect(sectionTexts(doc)).toEqual([
      { path: ['Handbook'], page: null, text: 'Handbook\n\nBe kind.' },
      { path: ['Handbook', 'Leave'], page: null, text: 'Leave\n\n25 days a year.' },
    ]);
  });

  it('fails bytes that are not the format they claim, saying why', async () => {
    await expect(parseDocument('application/pdf', Buffer.from('MZ not a pdf'))).rejects.toThrow('not a PDF');
    await expect(parseDocument('application/pdf', Buffer.from('%PDF-1.4 then garbage'))).rejects.toThrow(/not readable as PDF/);
    await expect(parseDocument('application/vnd.openxmlformats-officedocument.wordprocessingml.document', Buffer.from('PK'))).rejects.toThrow('not a DOCX');
    await expect(parseDocument('application/vnd.openxmlformats-officedocument.wordprocessingml.document', zip({ 'a.txt': 'x' }))).rejects.toThrow(/not readable as DOCX/);
  });
});
