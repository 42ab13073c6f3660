// Each format read into text and sections: headings and their paths, pages, rows that describe themselves, text a
// store cannot take made safe, and bytes that are not what they claim failing with the reason. The PDF and DOCX
// files are built here byte by byte (a minimal PDF with its cross-reference table; a DOCX as a stored ZIP), so the
// real readers (PDF.js, mammoth) read real files.
import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { parseDocument, UnreadableDocument, type ParsedDocument } from './parse.js';

const sectionTexts = (doc: ParsedDocument) => doc.sections.map((s) => ({ path: s.headingPath, page: s.page, text: doc.text.slice(s.start, s.end).trim() }));

/** A PDF of one page per entry, each showing its text in Helvetica. */
export function minimalPdf(pages: string[]): Buffer {
  const objects: string[] = [];
  const pageIds = pages.map((_, i) => 4 + i * 2);
  objects[1] = '<< /Type /Catalog /Pages 2 0 R >>';
  objects[2] = `<< /Type /Pages /Kids [${pageIds.map((id) => `${id} 0 R`).join(' ')}] /Count ${pages.length} >>`;
  objects[3] = '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>';
  pages.forEach((text, i) => {
    const stream = `BT /F1 12 Tf 72 720 Td (${text.replace(/[()\\]/g, '\\$&')}) Tj ET`;
    objects[pageIds[i]!] = `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${pageIds[i]! + 1} 0 R >>`;
    objects[pageIds[i]! + 1] = `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`;
  });
  let body = '%PDF-1.4\n';
  const offsets: number[] = [];
  for (let id = 1; id < objects.length; id++) {
    offsets[id] = body.length;
    body += `${id} 0 obj\n${objects[id]}\nendobj\n`;
  }
  const xref = body.length;
  body += `xref\n0 ${objects.length}\n0000000000 65535 f \n${offsets.slice(1).map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`;
  body += `trailer\n<< /Size ${objects.length} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(body, 'latin1');
}

/** A ZIP archive of stored (uncompressed) entries. */
function zip(entries: Record<string, string>): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, content] of Object.entries(entries)) {
    const data = Buffer.from(content, 'utf8');
    const fileName = Buffer.from(name, 'utf8');
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(fileName.length, 26);
    locals.push(local, fileName, data);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(fileName.length, 28);
    central.writeUInt32LE(offset, 42);
    centrals.push(central, fileName);
    offset += local.length + fileName.length + data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(Object.keys(entries).length, 8);
  end.writeUInt16LE(Object.keys(entries).length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

/** A DOCX of paragraphs, each either a heading (`# text`, `## text`) or body text. */
export function minimalDocx(paragraphs: string[]): Buffer {
  const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const body = paragraphs
    .map((p) => {
      const heading = /^(#{1,6}) (.*)$/.exec(p);
      const style = heading ? `<w:pPr><w:pStyle w:val="Heading${heading[1]!.length}"/></w:pPr>` : '';
      return `<w:p>${style}<w:r><w:t xml:space="preserve">${escape(heading ? heading[2]! : p)}</w:t></w:r></w:p>`;
    })
    .join('');
  return zip({
    '[Content_Types].xml':
      '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
    '_rels/.rels':
      '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
    'word/document.xml': `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${body}</w:body></w:document>`,
  });
}

describe('parseDocument', () => {
  it('reads plain text as one section, with text no store takes made safe and a BOM dropped', async () => {
    const doc = await parseDocument('text/plain', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('hello\u0000 world\n'), Buffer.from([0xff])]));
    expect(doc.text).toBe('hello\uFFFD world\n\uFFFD');
    expect(doc.sections).toEqual([{ headingPath: [], start: 0, end: doc.text.length, page: null }]);
  });

  it('reads Markdown by its headings, nested, and not by a # inside a code fence', async () => {
    const source = ['Intro line.', '', '# Guide', 'Welcome.', '', '## Install', 'Run it.', '```sh', '# not a heading', '```', '### Linux', 'apt.', '## Use', 'Ask.', '# Appendix ##', 'End.'].join('\n');
    const doc = await parseDocument('text/markdown', Buffer.from(source));
    expect(sectionTexts(doc)).toEqual([
      { path: [], page: null, text: 'Intro line.' },
      { path: ['Guide'], page: null, text: 'Guide\n\nWelcome.' },
      { path: ['Guide', 'Install'], page: null, text: 'Install\n\nRun it.\n```sh\n# not a heading\n```' },
      { path: ['Guide', 'Install', 'Linux'], page: null, text: 'Linux\n\napt.' },
      { path: ['Guide', 'Use'], page: null, text: 'Use\n\nAsk.' },
      { path: ['Appendix'], page: null, text: 'Appendix\n\nEnd.' },
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
