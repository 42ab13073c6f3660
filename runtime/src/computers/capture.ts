// What an exec keeps of a stream: up to a stated size, the rest read and dropped and said to be (both hosts).

/** Keeps up to `limit` bytes of a stream and counts the rest; `keep` false hands the bytes on without keeping them. */
export class Capture {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(
    private readonly limit: number,
    private readonly keep = true,
  ) {}

  /** The part of `chunk` kept, or undefined when none of it was. */
  add(chunk: Buffer): Buffer | undefined {
    const room = this.limit - this.size;
    if (room <= 0) {
      this.truncated = true;
      return undefined;
    }
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (kept.length < chunk.length) this.truncated = true;
    if (this.keep) this.chunks.push(kept);
    this.size += kept.length;
    return kept;
  }

  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}
