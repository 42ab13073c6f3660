// A project's computer settings (docs/decisions/0079): the command timeout, how many sandboxes it may hold at once,
// each sandbox's limits, when an idle one pauses and when one ends, and the image on Kubernetes. The control plane
// holds them (`PUT /api/projects/:id/computer`) and pushes them in the configuration; the runtime reads them for
// every sandbox it makes. One schema for both, so a value one side accepts the other never refuses.
import { z } from 'zod';

export const COMPUTER_DEFAULTS = {
  command_timeout_seconds: 120,
  max_sandboxes: 10,
  cpus: 1,
  memory_mib: 1024,
  processes: 512,
  disk_mib: 2048,
  idle_pause_seconds: 600,
  max_lifetime_seconds: 86_400,
} as const;

// A container image reference: registry/path:tag or @sha256:digest, nothing a shell or YAML could read otherwise.
const imageReference = /^[a-z0-9][a-z0-9._/:@-]{0,510}[a-z0-9]$/;

export const ComputerSettingsSchema = z
  .strictObject({
    command_timeout_seconds: z
      .int()
      .min(1)
      .max(3_600)
      .default(COMPUTER_DEFAULTS.command_timeout_seconds)
      .meta({ description: 'The longest one command may run; an exec asks for less or gets this' }),
    max_sandboxes: z
      .int()
      .min(0)
      .max(1_000)
      .default(COMPUTER_DEFAULTS.max_sandboxes)
      .meta({ description: 'Sandboxes the project holds at once (made, running or paused); 0 turns the computer off' }),
    cpus: z.number().min(0.1).max(16).default(COMPUTER_DEFAULTS.cpus).meta({ description: 'CPU time per second of each sandbox (1 is one core)' }),
    memory_mib: z.int().min(64).max(65_536).default(COMPUTER_DEFAULTS.memory_mib).meta({ description: 'Memory of each sandbox, MiB' }),
    processes: z.int().min(16).max(32_768).default(COMPUTER_DEFAULTS.processes).meta({ description: 'Processes and threads at once in each sandbox' }),
    disk_mib: z.int().min(16).max(1_048_576).default(COMPUTER_DEFAULTS.disk_mib).meta({ description: 'The size of each sandbox\'s /workspace, MiB' }),
    idle_pause_seconds: z
      .int()
      .min(10)
      .max(86_400)
      .default(COMPUTER_DEFAULTS.idle_pause_seconds)
      .meta({ description: 'A running sandbox no command used for this long is paused' }),
    max_lifetime_seconds: z
      .int()
      .min(60)
      .max(30 * 86_400)
      .default(COMPUTER_DEFAULTS.max_lifetime_seconds)
      .meta({ description: 'A sandbox is stopped this long after it was made, whatever it is doing; its files stay readable until it is deleted' }),
    image: z
      .string()
      .regex(imageReference, 'image must be a container image reference such as registry.example.com/sandbox:1')
      .optional()
      .meta({ description: "The image of each sandbox's Pod (Kubernetes host); unset: the deployment's default. The local host runs this machine's programs" }),
  })
  .meta({ id: 'ComputerSettings' });

export type ComputerSettings = z.infer<typeof ComputerSettingsSchema>;

/** The settings a project without any gets. */
export function computerSettingsOf(section: Partial<ComputerSettings> | undefined): ComputerSettings {
  return { ...COMPUTER_DEFAULTS, ...(section ?? {}) };
}
