// `multipart/form-data` bodies for the routes that take a small file inline (busboy, the parser multer and fastify
// use). A route names its file part and its size limit; the text fields are validated by the route's schema like a
// JSON body. Hostile forms (a missing boundary, a truncated body, too many or too large parts, a second file) are
// answered 4xx naming what was wrong, and nothing is kept of them.
import busboy from 'busboy';
import type { Request } from 'express';
import { AppError, invalidArgument } from '../errors.js';

export interface MultipartSpec {
  /** The name of the one file part. */
  file: string;
  /** The largest file the route takes inline. */
  maxFileBytes: number;
  /** What a file too large should be sent as instead; default: through POST /documents/presign-upload. */
  tooLargeHint?: string;
  /** A part the form may repeat instead of `file`: files named by their path (`filename`), at most `maxParts`. */
  repeated?: { name: string; maxParts: number };
}

export interface UploadedFile {
  filename: string | undefined;
  /** As the part declared it (`application/octet-stream` when it did not). */
  contentType: string;
  bytes: Buffer;
}

export interface MultipartForm {
  fields: Record<string, string>;
  file: UploadedFile | undefined;
  /** The repeated parts, in order (empty unless the spec names one). */
  files: UploadedFile[];
}

const MAX_FIELDS = 50;
const MAX_FIELD_BYTES = 64 * 1024;

/** Whether the request is a form this module reads. */
export const isMultipart = (req: Request): boolean => req.is('multipart/form-data') === 'multipart/form-data';

export function readMultipart(req: Request, spec: MultipartSpec): Promise<MultipartForm> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      const files = 1 + (spec.repeated?.maxParts ?? 0);
      parser = busboy({
        headers: req.headers,
        // Repeated parts are named by their path (a skill package's files): keep it, every part checked by the route.
        preservePath: spec.repeated !== undefined,
        limits: { fields: MAX_FIELDS, fieldSize: MAX_FIELD_BYTES, files, fileSize: spec.maxFileBytes, parts: MAX_FIELDS + files },
      });
    } catch (error) {
      reject(invalidArgument(`request body: ${error instanceof Error ? error.message : 'not a multipart form'}`));
      return;
    }
    const fields: Record<string, string> = Object.create(null) as Record<string, string>;
    let file: UploadedFile | undefined;
    const repeated: UploadedFile[] = [];
    let repeatedBytes = 0;
    let failure: AppError | undefined;
    const fail = (error: AppError) => {
      if (failure) return;
      failure = error;
      req.unpipe(parser);
      parser.removeAllListeners('close');
      // Read the rest of the request and drop it, so the answer is not written over a half-read upload.
      req.resume();
      reject(error);
    };
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) fail(new AppError('payload_too_large', `form field ${name} is longer than ${MAX_FIELD_BYTES} bytes`));
      else if (name in fields) fail(invalidArgument(`form field ${name} is given more than once`));
      else fields[name] = value;
    });
    parser.on('file', (name, stream, info) => {
      // A body cut short fails the part's stream as well as the parser.
      stream.on('error', (error: Error) => fail(invalidArgument(`request body is not a well-formed multipart form: ${error.message}`)));
      const isRepeated = spec.repeated !== undefined && name === spec.repeated.name;
      if ((name !== spec.file && !isRepeated) || (name === spec.file && file !== undefined)) {
        stream.resume();
        const parts = spec.repeated ? `part ${spec.file}, or parts ${spec.repeated.name}` : `part ${spec.file}`;
        fail(invalidArgument(name === spec.file ? `only one ${spec.file} part is taken` : `form part ${name} is not a field of this form; the file goes in ${parts}`));
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        // The repeated parts together may not pass one file's limit.
        if (isRepeated && (repeatedBytes += chunk.length) > spec.maxFileBytes) {
          fail(new AppError('payload_too_large', `the ${spec.repeated!.name} parts together are larger than ${spec.maxFileBytes} bytes`));
        }
      });
      stream.on('limit', () =>
        fail(new AppError('payload_too_large', `${name} is larger than ${spec.maxFileBytes} bytes: ${spec.tooLargeHint ?? 'upload it with POST /documents/presign-upload instead'}`)),
      );
      stream.on('end', () => {
        if (failure) return;
        const uploaded = { filename: info.filename || undefined, contentType: info.mimeType || 'application/octet-stream', bytes: Buffer.concat(chunks) };
        if (isRepeated) repeated.push(uploaded);
        else file = uploaded;
      });
    });
    parser.on('fieldsLimit', () => fail(new AppError('payload_too_large', `a form takes at most ${MAX_FIELDS} fields`)));
    parser.on('partsLimit', () => fail(new AppError('payload_too_large', `a form takes at most ${MAX_FIELDS + 1} parts`)));
    parser.on('filesLimit', () =>
      fail(spec.repeated ? new AppError('payload_too_large', `a form takes at most ${spec.repeated.maxParts} ${spec.repeated.name} parts`) : invalidArgument(`only one ${spec.file} part is taken`)),
    );
    parser.on('error', (error: unknown) => fail(invalidArgument(`request body is not a well-formed multipart form: ${error instanceof Error ? error.message : String(error)}`)));
    parser.on('close', () => {
      if (!failure) resolve({ fields, file, files: repeated });
    });
    req.on('error', (error) => fail(invalidArgument(`request body could not be read: ${error.message}`)));
    req.pipe(parser);
  });
}
