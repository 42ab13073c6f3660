// The spawner's own process (see spawner.ts): starts the programs its parent asks for and relays their output and
// exit over the IPC channel. It holds almost no memory, so its fork is cheap where the runtime's is not: fork
// copies the page tables of the process that forks, and a runtime holding a few hundred MiB took 20-60 ms per
// spawn on our test machine against ~3 ms from a small process. It ends with its parent.
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import type { Readable } from 'node:stream';

interface Start {
  type: 'start';
  id: number;
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Extra pipes the child gets, by fd number (bubblewrap's report on fd 9); their output is relayed as `fd<n>`. */
  extraPipes?: number[];
  detached?: boolean;
  /** Bytes of stdout and of stderr relayed at most (one more says there was more); the rest is read and dropped here. */
  outputLimit?: number;
}
interface Input {
  type: 'stdin';
  id: number;
  data?: Buffer;
  end?: boolean;
}
/** The parent read what it waits for: the program's pipes are closed on this side (a background process kept them). */
interface Release {
  type: 'release';
  id: number;
}
/** The parent's reader is behind (`hold`), or caught up: the program's output pipes are left unread meanwhile. */
interface Flow {
  type: 'flow';
  id: number;
  hold: boolean;
}
type Request = Start | Input | Release | Flow;

const children = new Map<number, ChildProcess>();
/** Programs whose output the parent asked to hold back. */
const held = new Set<number>();
const outputsOf = (child: ChildProcess | undefined) => (child?.stdio ?? []).slice(1).filter((stream): stream is Readable => stream != null && 'pause' in stream);
const send = (message: unknown): boolean => process.send?.(message) ?? false;

process.on('message', (message: Request) => {
  if (message.type === 'start') start(message);
  else if (message.type === 'flow') {
    if (message.hold) held.add(message.id);
    else held.delete(message.id);
    for (const stream of outputsOf(children.get(message.id))) {
      if (message.hold) stream.pause();
      else stream.resume();
    }
  } else if (message.type === 'release') {
    const child = children.get(message.id);
    for (const stream of child?.stdio ?? []) stream?.destroy();
  } else {
    const stdin = children.get(message.id)?.stdin;
    if (!stdin) return;
    if (message.data) stdin.write(Buffer.from(message.data));
    if (message.end) stdin.end();
  }
});
// Its parent gone, it goes too: what it started with --die-with-parent goes with it.
process.on('disconnect', () => process.exit(0));

function start(request: Start): void {
  const highest = Math.max(2, ...(request.extraPipes ?? []));
  const stdio: StdioOptions = Array.from({ length: highest + 1 }, (_, fd) => (fd <= 2 || request.extraPipes?.includes(fd) ? 'pipe' : 'ignore'));
  let child: ChildProcess;
  try {
    // From /: nothing of where the runtime was started shows in the programs' environment (PWD).
    child = spawn(request.command, request.args, { env: request.env, stdio, detached: request.detached === true, cwd: '/' });
  } catch (error) {
    send({ type: 'error', id: request.id, message: (error as Error).message });
    return;
  }
  children.set(request.id, child);
  child.stdin?.on('error', () => undefined);
  child.once('error', (error) => send({ type: 'error', id: request.id, message: error.message }));
  if (child.pid !== undefined) send({ type: 'spawned', id: request.id, pid: child.pid });
  const relay = (stream: Readable | null | undefined, name: string) => {
    let relayed = 0;
    const limit = request.outputLimit === undefined ? Number.POSITIVE_INFINITY : request.outputLimit + 1;
    stream?.on('data', (data: Buffer) => {
      if (relayed >= limit) return;
      const part = data.length > limit - relayed ? data.subarray(0, limit - relayed) : data;
      relayed += part.length;
      // The channel backs up (the runtime reads slower than the program writes): the pipe waits until this chunk is
      // sent, so this process never holds more than a chunk or so of any program's output.
      let paused = false;
      const sent = process.send?.({ type: 'data', id: request.id, stream: name, data: part }, undefined, {}, () => {
        if (paused && !held.has(request.id)) stream.resume();
      });
      if (sent === false) {
        paused = true;
        stream.pause();
      }
    });
  };
  relay(child.stdout, 'stdout');
  relay(child.stderr, 'stderr');
  for (const fd of request.extraPipes ?? []) relay(child.stdio[fd] as Readable, `fd${fd}`);
  // `close`, not `exit`: every byte of its pipes has been relayed by then (a process it left running in the
  // background may hold them open; the parent decides how long to wait for that).
  child.once('exit', (code, signal) => send({ type: 'exit', id: request.id, code, signal }));
  child.once('close', () => {
    children.delete(request.id);
    held.delete(request.id);
    send({ type: 'closed', id: request.id });
  });
}
