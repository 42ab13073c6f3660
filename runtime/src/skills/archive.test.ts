// Skill packages as uploaded: zip, tar.gz, a single SKILL.md or files by path, unpacked under limits, and every
// hostile shape refused with a 400 saying what was wrong; then the package read into skills, its manifest and its
// MCP servers, with warnings naming what was left out.
import { gzipSync } from 'node:zlib';
import { strToU8, zipSync } from 'fflate';
import { pack } from 'tar-stream';
import { describe, expect, it } from 'vitest';
import { MAX_FILE_BYTES, unpack } from './archive.js';
import { skillPackage } from './package.js';

const skill = (name: string, description = `Does ${name}`) => `---\nname: ${name}\ndescription: ${description}\n---\n# ${name}\nSteps.\n`;

async function tarGz(entries: Array<{ name: string; body?: string; type?: 'file' | 'symlink' | 'link'; linkname?: string }>): Promise<Buffer> {
  const packer = pack();
  const chunks: Buffer[] = [];
  packer.on('data', (chunk: unknown) => chunks.push(chunk as Buffer));
  const ended = new Promise<void>((resolve) => packer.on('end', () => resolve()));
  for (const entry of entries) {
    if (entry.type && entry.type !== 'file') packer.entry({ name: entry.name, type: entry.type, linkname: entry.linkname ?? 'x' });
    else packer.entry({ name: entry.name }, entry.body ?? '');
  }
  packer.finalize();
  await ended;
  return gzipSync(Buffer.concat(chunks));
}

const refusal = async (upload: Parameters<typeof unpack>[0]) => {
  const error = (await unpack(upload).then(() => undefined, (failure: unknown) => failure)) as { kind?: string; code?: string; message?: string } | undefined;
  expect(error, 'the upload should be refused').toBeDefined();
  expect(error!.kind).toBe('invalid_argument');
  return error!;
};

describe('unpacking a skill package', () => {
  it('reads a zip, a tar.gz, a single SKILL.md and files by path alike', async () => {
    const zip = Buffer.from(zipSync({ 'skills/pdf/SKILL.md': strToU8(skill('pdf')), 'skills/pdf/references/forms.md': strToU8('Forms.') }));
    expect([...(await unpack({ file: { filename: 'pdf.zip', bytes: zip } })).keys()].sort()).toEqual(['skills/pdf/SKILL.md', 'skills/pdf/references/forms.md']);
    const tgz = await tarGz([{ name: './skills/pdf/SKILL.md', body: skill('pdf') }, { name: 'skills/pdf/scripts/fill.py', body: 'print(1)' }]);
    expect([...(await unpack({ file: { filename: 'pdf.tar.gz', bytes: tgz } })).keys()].sort()).toEqual(['skills/pdf/SKILL.md', 'skills/pdf/scripts/fill.py']);
    expect([...(await unpack({ file: { filename: 'SKILL.md', bytes: Buffer.from(skill('one')) } })).keys()]).toEqual(['SKILL.md']);
    const parts = await unpack({ files: [{ path: 'skills/a/SKILL.md', bytes: Buffer.from(skill('a')) }, { path: 'skills\\a\\references\\x.md', bytes: Buffer.from('x') }] });
    expect([...parts.keys()]).toEqual(['skills/a/SKILL.md', 'skills/a/references/x.md']);
  });

  it('refuses paths that leave the package, in every form', async () => {
    for (const path of ['../evil.md', 'skills/../../evil.md', '/etc/passwd', 'C:/x.md']) {
      expect((await refusal({ files: [{ path, bytes: Buffer.from('x') }] })).code).toBe('unsafe_path');
    }
    const zip = Buffer.from(zipSync({ '../../outside.md': strToU8('x') }));
    expect((await refusal({ file: { filename: 'a.zip', bytes: zip } })).code).toBe('unsafe_path');
    expect((await refusal({ file: { filename: 'a.tar.gz', bytes: await tarGz([{ name: '../outside.md', body: 'x' }]) } })).code).toBe('unsafe_path');
  });

  it('refuses symbolic and hard links', async () => {
    const zip = Buffer.from(zipSync({ 'skills/a/SKILL.md': [strToU8('/etc/passwd'), { os: 3, attrs: (0o120777 << 16) >>> 0 }] }));
    expect((await refusal({ file: { filename: 'a.zip', bytes: zip } })).message).toMatch(/symbolic link/);
    expect((await refusal({ file: { filename: 'a.tgz', bytes: await tarGz([{ name: 'skills/a/SKILL.md', type: 'symlink', linkname: '/etc/passwd' }]) } })).message).toMatch(/symbolic link/);
    expect((await refusal({ file: { filename: 'a.tgz', bytes: await tarGz([{ name: 'skills/a/SKILL.md', type: 'link', linkname: 'x' }]) } })).message).toMatch(/hard link/);
  });

  it('stops a zip bomb or gzip bomb at the limit, whatever it claims, and refuses too many files', async () => {
    const zeros = new Uint8Array(MAX_FILE_BYTES + 1024);
    const bomb = Buffer.from(zipSync({ 'skills/a/SKILL.md': zeros }, { level: 9 }));
    expect(bomb.length).toBeLessThan(64 * 1024);
    expect((await refusal({ file: { filename: 'bomb.zip', bytes: bomb } })).code).toBe('package_too_large');
    const wide = Buffer.from(zipSync(Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`skills/a/f${i}.bin`, new Uint8Array(MAX_FILE_BYTES - 1)])), { level: 9 }));
    expect((await refusal({ file: { filename: 'wide.zip', bytes: wide } })).message).toMatch(/unpacks to more than 20 MiB/);
    const gzBomb = gzipSync(Buffer.alloc(30 * 1024 * 1024));
    expect((await refusal({ file: { filename: 'bomb.tar.gz', bytes: gzBomb } })).code).toBe('package_too_large');
    const many = Buffer.from(zipSync(Object.fromEntries(Array.from({ length: 501 }, (_, i) => [`skills/a/f${i}.md`, strToU8('x')]))));
    expect((await refusal({ file: { filename: 'many.zip', bytes: many } })).message).toMatch(/at most 500 files/);
  });

  it('refuses an archive that cannot be read', async () => {
    expect((await refusal({ file: { filename: 'broken.zip', bytes: Buffer.from('PK\u0003\u0004 not really a zip') } })).code).toBe('unreadable_package');
    expect((await refusal({ file: { filename: 'x.tar.gz', bytes: Buffer.from([0x1f, 0x8b, 1, 2, 3]) } })).code).toBe('unreadable_package');
  });
});

describe('reading a skill package', () => {
  const files = (entries: Record<string, string>) => new Map(Object.entries(entries).map(([path, text]) => [path, Buffer.from(text)]));

  it('publishes each SKILL.md under its frontmatter name, keeps its folder, writes plugin.json and names what it skipped', () => {
    const read = skillPackage(
      files({
        'skills/folder-name/SKILL.md': skill('pdf-forms', 'Fill PDF forms'),
        'skills/folder-name/references/fields.md': 'Fields.',
        'skills/folder-name/scripts/fill.py': 'print(1)',
        'skills/broken/SKILL.md': '# no frontmatter',
        'skills/lower/skill.md': skill('lower'),
        'notes.txt': 'stray',
      }),
      'forms.zip',
    );
    expect(read.skills).toEqual([{ name: 'pdf-forms', description: 'Fill PDF forms', dir: 'skills/folder-name' }]);
    expect(read.name).toBe('forms');
    expect(JSON.parse(read.files.get('plugin.json')!.toString())).toEqual({ name: 'forms', version: '1.0.0', description: 'Fill PDF forms', skills: ['pdf-forms'] });
    expect([...read.files.keys()].sort()).toEqual(['plugin.json', 'skills/folder-name/SKILL.md', 'skills/folder-name/references/fields.md', 'skills/folder-name/scripts/fill.py']);
    expect(read.warnings).toEqual(
      expect.arrayContaining([
        'skills/broken/SKILL.md: skipped, its frontmatter needs a name and a description',
        'skills/lower/skill.md: skipped, it belongs to no skill',
        'notes.txt: skipped, it belongs to no skill',
      ]),
    );
  });

  it('never overrides a supplied plugin.json, and registers only the servers mcp.json reaches over HTTP', () => {
    const manifest = '{"name":"my-plugin","version":"3.1.4","author":"acme"}';
    const read = skillPackage(
      files({
        'plugin.json': manifest,
        'mcp.json': JSON.stringify({ mcpServers: { crm: { url: 'https://mcp.example.com/mcp', headers: { 'X-Key': 'k' } }, local: { command: 'npx', args: ['server'] } } }),
        'SKILL.md': skill('crm-notes'),
      }),
      undefined,
    );
    expect(read.name).toBe('my-plugin');
    expect(read.files.get('plugin.json')!.toString()).toBe(manifest);
    expect(read.mcpServers).toEqual([{ name: 'crm', url: 'https://mcp.example.com/mcp', headers: { 'X-Key': 'k' } }]);
    expect(read.warnings).toEqual([expect.stringMatching(/^mcp.json: server 'local' refused: stdio MCP servers are refused/)]);
  });

  it('refuses a package without a skill, and a plugin.json that is not an object', () => {
    expect(() => skillPackage(files({ 'README.md': 'hi' }), 'x.zip')).toThrow(/has no skill/);
    expect(() => skillPackage(files({ 'plugin.json': '[1]', 'SKILL.md': skill('a') }), 'x.zip')).toThrow(/plugin.json is not a JSON object/);
  });
});

describe('hostile packages found by review', () => {
  const files = (entries: Record<string, string>) => new Map(Object.entries(entries).map(([path, text]) => [path, Buffer.from(text)]));

  it('stops a large zip bomb at the limit', async () => {
    const bomb = Buffer.from(zipSync({ 'skills/a/SKILL.md': new Uint8Array(100 * 1024 * 1024) }, { level: 9 }));
    expect(bomb.length).toBeLessThan(512 * 1024);
    expect((await refusal({ file: { filename: 'bomb.zip', bytes: bomb } })).code).toBe('package_too_large');
  });

  it('refuses a path past 1,024 bytes', async () => {
    expect((await refusal({ files: [{ path: `skills/${'a'.repeat(2_000)}/SKILL.md`, bytes: Buffer.from('x') }] })).code).toBe('unsafe_path');
  });

  it('skips a skill whose description holds NUL, cuts a long one without splitting an emoji, and refuses a deep or NUL-holding plugin.json', () => {
    const nul = skillPackage(files({ 'a/SKILL.md': '---\nname: a\ndescription: "bad\\0text"\n---\nx', 'b/SKILL.md': skill('b') }), 'x.zip');
    expect(nul.skills.map((s) => s.name)).toEqual(['b']);
    expect(nul.warnings[0]).toMatch(/^a\/SKILL.md: skipped, its description must not contain the NUL character/);
    const long = skillPackage(files({ 'SKILL.md': skill('long', `${'d'.repeat(1_023)}😀 and more`) }), undefined);
    expect(long.skills[0]!.description.isWellFormed()).toBe(true);
    expect(Array.from(long.skills[0]!.description)).toHaveLength(1_024);
    expect(() => skillPackage(files({ 'plugin.json': `${'['.repeat(100)}${']'.repeat(100)}`, 'SKILL.md': skill('a') }), undefined)).toThrow(/plugin.json is not a JSON object/);
    expect(() => skillPackage(files({ 'plugin.json': `{"a":${'{"b":'.repeat(40)}1${'}'.repeat(40)}}`, 'SKILL.md': skill('a') }), undefined)).toThrow(/nests deeper than 32/);
    expect(() => skillPackage(files({ 'plugin.json': '{"name":"x\\u0000"}', 'SKILL.md': skill('a') }), undefined)).toThrow(/NUL/);
  });
});
