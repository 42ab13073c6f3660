// A skill package as uploaded (SPEC.md Skill; docs/decisions/0056): a .zip, a .tar.gz, a single SKILL.md, or files
// sent one part each, named by path. Unpacked in memory under limits, with every hostile shape refused by a 400 that
// says what was wrong: an archive too large, too many files, a file or a whole that unpacks too large (a zip or gzip
// bomb stops at the limit, whatever its headers claim), a path that leaves the package (`..`, absolute, a drive), a
// symbolic or hard link, or an archive that cannot be read.
import { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import { Unzip, UnzipInflate, type UnzipFile } from 'fflate';
import { extract } from 'tar-stream';
import { AppError, invalidArgument } from '@agentplane/lib/errors';

export const MAX_PACKAGE_BYTES = 10 * 1024 * 1024;
export const MAX_PACKAGE_FILES = 500;
export const MAX_FILE_BYTES = 2 * 1024 * 1024;
export const MAX_UNPACKED_BYTES = 20 * 1024 * 1024;
/** The longest path a package may hold, in bytes. */
export const MAX_PATH_BYTES = 1_024;
/**
 * How much of a zip is handed to the inflater at a time: deflate expands at most ~1,032 times, so no step makes more
 * than about a MiB before the limits are checked again.
 */
const INFLATE_SLICE = 1_024;

export interface PackageUpload {
  /** One file: an archive or a SKILL.md. */
  file?: { filename: string | undefined; bytes: Buffer };
  /** Or the files one by one, each named by its path in the package. */
  files?: Array<{ path: string; bytes: Buffer }>;
}

/** What an upload may hold; a skill package's are the constants above, a sandbox's upload its own. */
export interface ArchiveLimits {
  /** What the upload is called in answers: `package`, `archive`. */
  what: string;
  archiveBytes: number;
  files: number;
  fileBytes: number;
  unpackedBytes: number;
}

export const PACKAGE_LIMITS: ArchiveLimits = {
  what: 'package',
  archiveBytes: MAX_PACKAGE_BYTES,
  files: MAX_PACKAGE_FILES,
  fileBytes: MAX_FILE_BYTES,
  unpackedBytes: MAX_UNPACKED_BYTES,
};

const tooLarge = (message: string) => new AppError('invalid_argument', message, { code: 'package_too_large' });

/** A path inside the package, made plain (`./a//b` → `a/b`); a 400 for one that would leave it. */
export function packagePath(raw: string, what = 'package'): string {
  const path = raw.replace(/\\/g, '/');
  if (path.includes('\u0000')) throw invalidArgument(`${JSON.stringify(raw)}: a path may not hold NUL`, { code: 'unsafe_path' });
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) throw invalidArgument(`${JSON.stringify(raw)}: an absolute path would leave the ${what}`, { code: 'unsafe_path' });
  const parts = path.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) throw invalidArgument(`${JSON.stringify(raw)}: a path with .. would leave the ${what}`, { code: 'unsafe_path' });
  if (parts.length === 0) throw invalidArgument(`${JSON.stringify(raw)}: an empty path`, { code: 'unsafe_path' });
  const plain = parts.join('/');
  if (Buffer.byteLength(plain) > MAX_PATH_BYTES) throw invalidArgument(`${JSON.stringify(plain.slice(0, 80))}...: a path is at most ${MAX_PATH_BYTES} bytes`, { code: 'unsafe_path' });
  if (!plain.isWellFormed()) throw invalidArgument(`${JSON.stringify(raw)}: a path must be well-formed Unicode text`, { code: 'unsafe_path' });
  return plain;
}

/** Counts files and bytes as they are unpacked, refusing past the limits. */
class Budget {
  private count = 0;
  private bytes = 0;
  readonly files = new Map<string, Buffer>();

  constructor(readonly limits: ArchiveLimits) {}

  add(path: string, bytes: Buffer): void {
    if (++this.count > this.limits.files) throw tooLarge(`a ${this.limits.what} holds at most ${this.limits.files} files`);
    this.grow(path, bytes.length);
    this.files.set(path, bytes);
  }

  /** A file whose bytes were counted as they were unpacked. */
  keep(path: string, bytes: Buffer): void {
    if (++this.count > this.limits.files) throw tooLarge(`a ${this.limits.what} holds at most ${this.limits.files} files`);
    this.files.set(path, bytes);
  }

  /** Bytes of `path` being unpacked, counted as they come. */
  grow(path: string, more: number, soFar = more): void {
    if (soFar > this.limits.fileBytes) throw tooLarge(`${path} unpacks to more than ${this.limits.fileBytes / 1024 / 1024} MiB`);
    this.bytes += more;
    if (this.bytes > this.limits.unpackedBytes) throw tooLarge(`the ${this.limits.what} unpacks to more than ${this.limits.unpackedBytes / 1024 / 1024} MiB`);
  }
}

/** The package's files by path, unpacked from the upload; anything that goes wrong reading it is a 400. */
export async function unpack(upload: PackageUpload): Promise<Map<string, Buffer>> {
  try {
    return await unpackOrThrow(upload);
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw invalidArgument(`the package cannot be read: ${error instanceof Error ? error.message : String(error)}`, { code: 'unreadable_package' });
  }
}

/**
 * The files of one archive (a .zip, a .tar.gz or a plain .tar, told by its first bytes) under `limits`; a 400 for
 * anything else, or for any hostile shape. Links are refused, whatever they point at.
 */
export async function unpackArchive(bytes: Buffer, limits: ArchiveLimits): Promise<Map<string, Buffer>> {
  try {
    const budget = new Budget(limits);
    if (bytes.length > limits.archiveBytes) throw tooLarge(`an ${limits.what} is at most ${limits.archiveBytes / 1024 / 1024} MiB`);
    if (bytes[0] === 0x50 && bytes[1] === 0x4b) unzip(bytes, budget);
    else if (bytes[0] === 0x1f && bytes[1] === 0x8b) await untar(gunzip(bytes, limits), budget);
    else if (bytes.subarray(257, 262).toString('latin1') === 'ustar') await untar(bytes, budget);
    else throw invalidArgument(`the ${limits.what} is not a zip, a gzip'd tar or a tar archive`, { code: 'unreadable_package' });
    return budget.files;
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw invalidArgument(`the ${limits.what} cannot be read: ${error instanceof Error ? error.message : String(error)}`, { code: 'unreadable_package' });
  }
}

async function unpackOrThrow(upload: PackageUpload): Promise<Map<string, Buffer>> {
  const budget = new Budget(PACKAGE_LIMITS);
  if (upload.files && upload.files.length > 0) {
    for (const part of upload.files) budget.add(packagePath(part.path), part.bytes);
    return budget.files;
  }
  const file = upload.file;
  if (!file) throw invalidArgument('a package is a `file` part (.zip, .tar.gz or SKILL.md) or `files` parts named by path');
  if (file.bytes.length > MAX_PACKAGE_BYTES) throw tooLarge(`a package is at most ${MAX_PACKAGE_BYTES / 1024 / 1024} MiB`);
  const name = (file.filename ?? '').toLowerCase();
  const bytes = file.bytes;
  if (bytes[0] === 0x50 && bytes[1] === 0x4b) unzip(bytes, budget);
  else if (bytes[0] === 0x1f && bytes[1] === 0x8b) await untar(gunzip(bytes, PACKAGE_LIMITS), budget);
  else if (name === 'skill.md' || name.endsWith('/skill.md') || (!name.endsWith('.zip') && !name.endsWith('.gz') && !name.endsWith('.tgz'))) {
    budget.add('SKILL.md', bytes);
  } else {
    throw invalidArgument(`${file.filename} is not a zip or gzip archive its name says it is`, { code: 'unreadable_package' });
  }
  return budget.files;
}

/** Unix file type bits of a zip entry's external attributes, when a Unix tool made it. */
const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;

function unzip(bytes: Buffer, budget: Budget): void {
  const entries: Array<{ path: string; chunks: Uint8Array[]; size: number }> = [];
  let failure: unknown;
  const unzipper = new Unzip((entry: UnzipFile) => {
    if (failure) return;
    try {
      if (entry.name.endsWith('/')) return;
      const path = packagePath(entry.name, budget.limits.what);
      const record = { path, chunks: [] as Uint8Array[], size: 0 };
      entries.push(record);
      entry.ondata = (error, chunk) => {
        if (failure) return;
        if (error) {
          failure = invalidArgument(`the zip archive cannot be read: ${error.message}`, { code: 'unreadable_package' });
          return;
        }
        record.size += chunk.length;
        try {
          budget.grow(path, chunk.length, record.size);
        } catch (limit) {
          failure = limit;
          entry.terminate();
          return;
        }
        record.chunks.push(chunk);
      };
      entry.start();
    } catch (error) {
      failure = error;
    }
  });
  unzipper.register(UnzipInflate);
  try {
    // A slice at a time, so a bomb is stopped at the limit rather than inflated whole first.
    for (let at = 0; at < bytes.length && !failure; at += INFLATE_SLICE) unzipper.push(bytes.subarray(at, at + INFLATE_SLICE), at + INFLATE_SLICE >= bytes.length);
  } catch (error) {
    if (!failure) failure = error;
  }
  if (failure instanceof AppError) throw failure;
  if (failure) throw invalidArgument(`the zip archive cannot be read: ${(failure as Error).message ?? String(failure)}`, { code: 'unreadable_package' });
  refuseLinks(bytes, budget.limits.what);
  for (const entry of entries) budget.keep(entry.path, Buffer.concat(entry.chunks));
}

/** A zip's central directory: a Unix symbolic link (external attributes S_IFLNK) is refused. */
function refuseLinks(bytes: Buffer, what: string): void {
  const end = bytes.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end < 0 || end + 22 > bytes.length) throw invalidArgument('the zip archive has no end of central directory', { code: 'unreadable_package' });
  const entries = bytes.readUInt16LE(end + 10);
  let at = bytes.readUInt32LE(end + 16);
  for (let i = 0; i < entries && at + 46 <= bytes.length; i++) {
    if (bytes.readUInt32LE(at) !== 0x02014b50) break;
    const madeBy = bytes.readUInt8(at + 5);
    const external = bytes.readUInt32LE(at + 38);
    const nameLength = bytes.readUInt16LE(at + 28);
    const name = bytes.subarray(at + 46, at + 46 + nameLength).toString('utf8');
    if (madeBy === 3 && ((external >>> 16) & S_IFMT) === S_IFLNK) throw invalidArgument(`${name} is a symbolic link: a ${what} holds files only`, { code: 'unsafe_path' });
    at += 46 + nameLength + bytes.readUInt16LE(at + 30) + bytes.readUInt16LE(at + 32);
  }
}

function gunzip(bytes: Buffer, limits: ArchiveLimits): Buffer {
  try {
    // zlib stops at the limit (it never makes more), whatever the stream would inflate to.
    return gunzipSync(bytes, { maxOutputLength: limits.unpackedBytes + limits.files * 1024 });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || error instanceof RangeError) {
      throw tooLarge(`the ${limits.what} unpacks to more than ${limits.unpackedBytes / 1024 / 1024} MiB`);
    }
    throw invalidArgument(`the gzip archive cannot be read: ${(error as Error).message}`, { code: 'unreadable_package' });
  }
}

async function untar(bytes: Buffer, budget: Budget): Promise<void> {
  const reader = extract();
  const done = new Promise<void>((resolve, reject) => {
    reader.on('entry', (header, stream, next) => {
      // The entry's stream fails with the archive when it is stopped; the archive's own error is what is reported.
      stream.on('error', () => undefined);
      try {
        if (header.type === 'directory') {
          stream.resume();
          stream.on('end', next);
          return;
        }
        if (header.type === 'symlink' || header.type === 'link') throw invalidArgument(`${header.name} is a ${header.type === 'link' ? 'hard' : 'symbolic'} link: a ${budget.limits.what} holds files only`, { code: 'unsafe_path' });
        if (header.type !== 'file' && header.type !== 'contiguous-file') {
          stream.resume();
          stream.on('end', next);
          return;
        }
        const path = packagePath(header.name, budget.limits.what);
        const chunks: Buffer[] = [];
        let size = 0;
        stream.on('data', (data: unknown) => {
          const chunk = data as Buffer;
          size += chunk.length;
          try {
            budget.grow(path, chunk.length, size);
          } catch (limit) {
            reader.destroy(limit as Error);
            return;
          }
          chunks.push(chunk);
        });
        stream.on('end', () => {
          try {
            budget.keep(path, Buffer.concat(chunks));
            next();
          } catch (limit) {
            reader.destroy(limit as Error);
          }
        });
      } catch (error) {
        reader.destroy(error as Error);
      }
    });
    reader.on('finish', resolve);
    reader.on('error', (error) => reject(error instanceof AppError ? error : invalidArgument(`the tar archive cannot be read: ${error.message}`, { code: 'unreadable_package' })));
  });
  Readable.from([bytes]).pipe(reader);
  await done;
}
