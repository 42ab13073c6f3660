// A tar archive made in memory, for tests that upload one (hostile entries included: links, paths leaving it).
import { pack } from 'tar-stream';

export interface TarEntry {
  name: string;
  body?: string;
  type?: 'file' | 'symlink' | 'directory';
  linkname?: string;
}

export async function tarOf(entries: TarEntry[]): Promise<Buffer> {
  const archive = pack();
  for (const entry of entries) archive.entry({ name: entry.name, type: entry.type ?? 'file', ...(entry.linkname ? { linkname: entry.linkname } : {}) }, entry.body ?? '');
  archive.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of archive) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
