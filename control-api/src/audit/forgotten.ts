// Mint entries of subjects the project's runtime forgot (docs/decisions/0074). The runtime never calls the control
// plane, so the control plane asks: the runtime's admin surface lists the forgotten subjects as digests (of the tenant
// id and the path), and each mint entry of the project whose subject has one of those digests is made to name
// `forgotten` instead. Asked before the project's log is read and, for every project, on a timer.
import { sql, type Kysely } from 'kysely';
import { errorMessage } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';
import type { Provisioner, TenantTarget } from '../provisioning/provisioner.js';
import type { ControlSchema } from '../store/schema.js';

/** How often every project's runtime is asked. */
export const FORGOTTEN_PASS_MS = 5 * 60_000;

export class ForgottenMints {
  constructor(
    private readonly db: Kysely<ControlSchema>,
    private readonly projects: { targetOf(projectId: string): Promise<TenantTarget> },
    private readonly provisioner: Provisioner | undefined,
    private readonly logger: Logger,
  ) {}

  /** Makes the project's mint entries that name a forgotten subject say `forgotten`; answers how many changed. */
  async settle(projectId: string): Promise<number> {
    if (!this.provisioner) return 0;
    const target = await this.projects.targetOf(projectId);
    const { subjects } = await this.provisioner.withRuntime(target, (runtime) =>
      runtime.tenantCall<{ subjects: { digest: string }[] }>(target.tenantId, 'GET', '/forgotten-subjects'),
    );
    if (subjects.length === 0) return 0;
    const digests = subjects.map((subject) => subject.digest);
    return this.db.transaction().execute(async (trx) => {
      await sql`select set_config('control.audit', 'forget', true)`.execute(trx);
      // The digest as lib/src/tokens/forgotten.ts makes it: SHA-256 of the lower-case tenant id, a newline, the path.
      const result = await sql`
        update control.audit_log set resource = (resource - 'subject') || '{"subject": "forgotten"}'::jsonb
        where project_id = ${projectId}
          and resource ->> 'subject' is not null and resource ->> 'subject' <> 'forgotten'
          and encode(sha256(convert_to(${`${target.tenantId.toLowerCase()}\n`} || (resource ->> 'subject'), 'UTF8')), 'hex') in (${sql.join(digests)})
      `.execute(trx);
      return Number(result.numAffectedRows ?? 0n);
    });
  }

  /** `settle` before the project's log is shown; a runtime that does not answer leaves the entries to the next pass. */
  async settleBeforeRead(projectId: string): Promise<void> {
    await this.settle(projectId).catch((error: unknown) =>
      this.logger.warn({ project_id: projectId, err: errorMessage(error) }, "could not read the subjects the project's runtime forgot before showing its audit log"),
    );
  }

  /** Every project in turn; one whose runtime does not answer is asked again at the next pass. */
  async settleAll(): Promise<void> {
    if (!this.provisioner) return;
    const projects = await this.db.selectFrom('projects').select('id').execute();
    for (const { id } of projects) {
      try {
        const changed = await this.settle(id);
        if (changed > 0) this.logger.info({ project_id: id, entries: changed }, 'mint entries of forgotten subjects no longer name them');
      } catch (error) {
        this.logger.warn({ project_id: id, err: errorMessage(error) }, "could not read the subjects the project's runtime forgot; asked again at the next pass");
      }
    }
  }

  /** Starts the timer; answers its stop. */
  start(intervalMs = FORGOTTEN_PASS_MS): () => Promise<void> {
    let running: Promise<void> | undefined;
    const timer = setInterval(() => {
      running ??= this.settleAll().finally(() => (running = undefined));
    }, intervalMs);
    timer.unref();
    return async () => {
      clearInterval(timer);
      await running;
    };
  }
}
