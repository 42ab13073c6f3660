// Starts the local host's programs (bubblewrap, nsenter, mount...) from a small process of its own rather than from
// the runtime (spawner-child.ts says why: a fork costs what the forking process holds). One per host, started
// once; it ends with the runtime. A program's output comes back chunk by chunk; its exit once its pipes are drained.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface SpawnOptions {
  env: Record<string, string>;
  /** More pipes for the program, by fd number; their output arrives as stream `fd<n>`. */
  extraPipes?: number[];
  /** Its own process group (what a kill of the group ends). */
  detached?: boolean;
  onData?: (stream: string, chunk: Buffer) => void;
  /** stdout and stderr are each relayed up to this many bytes and one more (which says there was more). */
  outputLimit?: number;
}

export interface SpawnedProgram {
  /** The program's PID as this machine numbers it; rejects when it could not be started. */
  pid: Promise<number>;
  /** Its exit: code, or the signal that ended it. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Every pipe it had has closed (what it left running in the background may hold them open for good). */
  closed: Promise<void>;
  write(data: Buffer): void;
  end(): void;
  /** Stops reading its pipes (what it left in the background keeps them open): `closed` follows. */
  release(): void;
  /** Leaves its output pipes unread (the reader is behind), or reads them again. */
  flow(hold: boolean): void;
}

interface Pending {
  onData?: (stream: string, chunk: Buffer) => void;
  pid: { resolve(pid: number): void; reject(error: Error): void };
  exited: { resolve(value: { code: number | null; signal: NodeJS.Signals | null }): void; reject(error: Error): void };
  closed: () => void;
}

type Reply =
  | { type: 'spawned'; id: number; pid: number }
  | { type: 'data'; id: number; stream: string; data: Uint8Array }
  | { type: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null }
  | { type: 'closed'; id: number }
  | { type: 'error'; id: number; message: string };

export class Spawner {
  private next = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly child: ChildProcess;
  private gone: Error | undefined;

  constructor() {
    // The child module beside this one: its .ts when the runtime runs from source (with the same loader flags),
    // its .js when it runs built.
    const here = fileURLToPath(import.meta.url);
    const script = here.replace(/spawner\.(ts|js)$/, 'spawner-child.$1');
    const loader = process.execArgv.filter((arg) => !arg.startsWith('--inspect'));
    // No new privileges, and no inheritable capabilities, for the spawner and so for every program it starts: the
    // sandboxes and each command run in them inherit both, without paying a setpriv per command (~2 ms of ~10).
    // Nothing it starts needs to gain any through exec: it runs them as root, or drops to the sandbox's user.
    this.child = spawn('/usr/bin/setpriv', ['--no-new-privs', '--inh-caps=-all', '--', process.execPath, ...loader, '--max-old-space-size=64', script], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      serialization: 'advanced',
    });
    this.child.on('message', (reply: Reply) => this.receive(reply));
    this.child.once('exit', (code, signal) => {
      this.gone = new Error(`the sandbox spawner ended (${code ?? signal})`);
      for (const [id, pending] of this.pending) {
        pending.pid.reject(this.gone);
        pending.exited.reject(this.gone);
        pending.closed();
        this.pending.delete(id);
      }
    });
    this.idle();
  }

  spawn(command: string, args: string[], options: SpawnOptions): SpawnedProgram {
    const id = this.next++;
    let pid!: Pending['pid'];
    let exited!: Pending['exited'];
    let closed!: () => void;
    const program: SpawnedProgram = {
      pid: new Promise((resolve, reject) => (pid = { resolve, reject })),
      exited: new Promise((resolve, reject) => (exited = { resolve, reject })),
      closed: new Promise((resolve) => (closed = resolve)),
      write: (data) => void this.child.send({ type: 'stdin', id, data }),
      end: () => void this.child.send({ type: 'stdin', id, end: true }),
      release: () => void this.child.send({ type: 'release', id }),
      flow: (hold) => void this.child.send({ type: 'flow', id, hold }),
    };
    // Callers that only await `exited` must not see an unhandled rejection on `pid`.
    program.pid.catch(() => undefined);
    if (this.gone) {
      pid.reject(this.gone);
      exited.reject(this.gone);
      closed();
      return program;
    }
    this.pending.set(id, { ...(options.onData ? { onData: options.onData } : {}), pid, exited, closed });
    this.busy();
    this.child.send({
      type: 'start',
      id,
      command,
      args,
      env: options.env,
      extraPipes: options.extraPipes ?? [],
      detached: options.detached === true,
      ...(options.outputLimit === undefined ? {} : { outputLimit: options.outputLimit }),
    });
    return program;
  }

  /** Runs a program to its end; throws with its stderr when it fails. */
  async run(command: string, args: string[], env: Record<string, string> = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }): Promise<string> {
    let out = '';
    let err = '';
    const program = this.spawn(command, args, { env, onData: (stream, chunk) => (stream === 'stdout' ? (out += chunk.toString()) : (err += chunk.toString())) });
    program.end();
    const { code, signal } = await program.exited;
    await program.closed;
    if (code !== 0) throw new Error(`${command} ${args.join(' ')} failed (${code ?? signal}): ${err.trim()}`);
    return out;
  }

  close(): void {
    this.child.kill('SIGTERM');
  }

  private receive(reply: Reply): void {
    const pending = this.pending.get(reply.id);
    if (!pending) return;
    switch (reply.type) {
      case 'spawned':
        pending.pid.resolve(reply.pid);
        break;
      case 'data':
        pending.onData?.(reply.stream, Buffer.from(reply.data.buffer, reply.data.byteOffset, reply.data.byteLength));
        break;
      case 'exit':
        pending.exited.resolve({ code: reply.code, signal: reply.signal });
        break;
      case 'error': {
        const error = new Error(reply.message);
        pending.pid.reject(error);
        pending.exited.reject(error);
        pending.closed();
        this.pending.delete(reply.id);
        this.idle();
        break;
      }
      case 'closed':
        pending.closed();
        this.pending.delete(reply.id);
        this.idle();
        break;
    }
  }

  // The spawner keeps the runtime alive only while a program of its runs.
  private busy(): void {
    this.child.ref();
    (this.child.channel as { ref?: () => void } | undefined)?.ref?.();
  }

  private idle(): void {
    if (this.pending.size > 0) return;
    this.child.unref();
    (this.child.channel as { unref?: () => void } | undefined)?.unref?.();
  }
}
