// The project's unattended work: its scheduled tasks (every end-user's, read-only: each belongs to the subject that
// made it) and its webhook triggers: every one listed; the console's own made (URL and secret shown once), given a
// new URL (shown once) and removed after naming them. Another subject's trigger is only its owner's to change.
import { useState, type FormEvent } from 'react';
import { ConfirmButton } from '../../components/confirm.js';
import { QueryState } from '../../components/query-state.js';
import { DataTable } from '../../components/data-table.js';
import { ErrorMessage } from '../../components/error-message.js';
import { ShownOnce } from '../../components/shown-once.js';
import { PAGE, useCreateTrigger, useDeleteTrigger, useRotateTrigger, useTasks, useTriggers, useTriggerSubject, type Task, type Trigger, type TriggerWithUrl } from './tasks-queries.js';

const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : '—');

function scheduleOf(task: Task): string {
  if (task.cron) return `cron ${task.cron} (${task.timezone || 'UTC'})`;
  if (task.interval_seconds !== null) return `every ${task.interval_seconds} s`;
  if (task.run_at) return `once, at ${when(task.run_at)}`;
  return '—';
}

/** Newer and older pages of a list that answers has_more and next_offset. */
function Pager({ what, offset, page, onOffset }: { what: string; offset: number; page: { has_more: boolean; next_offset: number | null }; onOffset: (offset: number) => void }) {
  if (offset === 0 && !page.has_more) return null;
  return (
    <div className="actions">
      <button type="button" className="secondary" disabled={offset === 0} onClick={() => onOffset(Math.max(0, offset - PAGE))}>
        Newer {what}
      </button>
      <button type="button" className="secondary" disabled={!page.has_more || page.next_offset === null} onClick={() => onOffset(page.next_offset ?? offset)}>
        Older {what}
      </button>
    </div>
  );
}

function Tasks({ projectId }: { projectId: string }) {
  const [offset, setOffset] = useState(0);
  const tasks = useTasks(projectId, offset);
  const page = tasks.data;
  return (
    <section aria-labelledby="tasks-heading">
      <h2 id="tasks-heading">Scheduled tasks</h2>
      <p className="note">Tasks end-users (or their agents) scheduled; each runs as the subject that made it. They are changed through the data plane by their owners.</p>
      <QueryState query={tasks} what="scheduled tasks" />
      {page?.tasks.length === 0 && offset === 0 ? <p>No scheduled tasks.</p> : null}
      {page && page.tasks.length > 0 ? (
        <DataTable columns={['Task', 'Owner', 'Status', 'Schedule', 'Next run', 'Last run']} labelledBy="tasks-heading">
          {page.tasks.map((task) => (
            <tr key={task.id}>
              <td>
                {task.name}
                <br />
                <span className="note">{task.prompt}</span>
              </td>
              <td>{task.subject}</td>
              <td>
                <span className={task.status === 'failed' ? 'error' : undefined}>{task.status}</span>
                {task.last_error ? <span className="note"> ({task.last_error})</span> : null}
              </td>
              <td>{scheduleOf(task)}</td>
              <td>{when(task.next_run_at)}</td>
              <td>
                {when(task.last_run_at)}
                {task.run_count ? <span className="note"> ({task.run_count} run{task.run_count === 1 ? '' : 's'})</span> : null}
                {task.last_run_error ? <span className="error"> {task.last_run_error}</span> : task.last_finish_reason ? <span className="note"> stopped: {task.last_finish_reason}</span> : null}
              </td>
            </tr>
          ))}
        </DataTable>
      ) : null}
      {page ? <Pager what="tasks" offset={offset} page={page} onOffset={setOffset} /> : null}
    </section>
  );
}

function NewTriggerForm({ projectId, onMade }: { projectId: string; onMade: (made: TriggerWithUrl) => void }) {
  const create = useCreateTrigger(projectId);
  const [name, setName] = useState('');
  const [prompt, setPrompt] = useState('');
  const [signed, setSigned] = useState(false);
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    create.mutate(
      { name: name.trim(), prompt: prompt.trim(), signed },
      {
        onSuccess: (made) => {
          setName('');
          setPrompt('');
          setSigned(false);
          onMade(made);
        },
      },
    );
  }
  return (
    <form onSubmit={submit} aria-labelledby="new-trigger-heading">
      <h3 id="new-trigger-heading">Make a trigger</h3>
      <label htmlFor="trigger-name">Name</label>
      <input id="trigger-name" value={name} onChange={(event) => setName(event.target.value)} maxLength={200} placeholder="CRM events" required />
      <label htmlFor="trigger-prompt">Prompt (the event's JSON follows it)</label>
      <textarea id="trigger-prompt" value={prompt} onChange={(event) => setPrompt(event.target.value)} rows={3} placeholder="A CRM event came in: act on it." required />
      <label className="choice">
        <input type="checkbox" checked={signed} onChange={(event) => setSigned(event.target.checked)} /> Events must be signed (X-Signature with a secret shown once)
      </label>
      <button type="submit" disabled={create.isPending}>
        Make trigger
      </button>
      <ErrorMessage error={create.error} />
    </form>
  );
}

const triggerName = (trigger: Trigger) => `trigger ${trigger.name} (…${trigger.url_hint})`;

function Triggers({ projectId }: { projectId: string }) {
  const [offset, setOffset] = useState(0);
  const triggers = useTriggers(projectId, offset);
  const rotate = useRotateTrigger(projectId);
  const remove = useDeleteTrigger(projectId);
  const { subject } = useTriggerSubject(projectId);
  // What a creation or rotation answered once: the URL, and a new signed trigger's secret; each dismissed on its own.
  const [url, setUrl] = useState<{ name: string; value: string; note: string } | null>(null);
  const [secret, setSecret] = useState<{ name: string; value: string } | null>(null);
  const page = triggers.data;

  function made(trigger: TriggerWithUrl) {
    setUrl({ name: trigger.name, value: trigger.url, note: 'Other systems POST JSON events to it, with no token: the URL is the credential.' });
    setSecret(trigger.signing_secret ? { name: trigger.name, value: trigger.signing_secret } : null);
  }

  return (
    <section aria-labelledby="triggers-heading">
      <h2 id="triggers-heading">Webhook triggers</h2>
      <p className="note">
        Secret URLs other systems post events to, each starting an unattended turn of the trigger's owner. Triggers made here belong to <code>{subject}</code>.
      </p>
      {url ? (
        <>
          <ShownOnce label={`URL of trigger ${url.name}`} value={url.value} onDismiss={() => setUrl(null)} />
          <p className="note">{url.note}</p>
        </>
      ) : null}
      {secret ? <ShownOnce label={`Signing secret of trigger ${secret.name}`} value={secret.value} onDismiss={() => setSecret(null)} /> : null}
      {url || secret ? null : <NewTriggerForm projectId={projectId} onMade={made} />}
      <h3 id="trigger-list-heading">Triggers</h3>
      <QueryState query={triggers} what="triggers" />
      {page?.triggers.length === 0 && offset === 0 ? <p>No triggers yet.</p> : null}
      {page && page.triggers.length > 0 ? (
        <DataTable columns={['Trigger', 'Owner', 'URL ends with', 'Events', 'Made', 'Actions']} labelledBy="trigger-list-heading">
          {page.triggers.map((trigger) => (
            <tr key={trigger.id}>
              <td>
                {trigger.name}
                {trigger.signed ? ' (signed)' : ''}
                <br />
                <span className="note">{trigger.prompt}</span>
              </td>
              <td>{trigger.subject}</td>
              <td>
                <code>…{trigger.url_hint}</code>
                {trigger.previous_url_until ? <span className="note"> (the old URL answers until {when(trigger.previous_url_until)})</span> : null}
              </td>
              <td>
                {trigger.fire_count}
                {trigger.last_fired_at ? <span className="note"> (last {when(trigger.last_fired_at)})</span> : null}
              </td>
              <td>{when(trigger.created_at)}</td>
              <td>
                {trigger.subject === subject ? (
                  <>
                    <ConfirmButton
                      label="Rotate"
                      target={`the URL of ${triggerName(trigger)}`}
                      consequence="A new URL is shown once; the current one still answers for 24 hours, then no more. The signing secret is unchanged."
                      onConfirm={async () => {
                        const rotated = await rotate.mutateAsync(trigger.id);
                        setSecret(null);
                        setUrl({ name: rotated.name, value: rotated.url, note: `The old URL answers until ${when(rotated.previous_url_until)} (24 hours); move your senders to the new one.` });
                      }}
                    />{' '}
                    <ConfirmButton label="Delete" target={triggerName(trigger)} consequence="Its URLs answer no more; runs it started go on. This cannot be undone." onConfirm={() => remove.mutateAsync(trigger.id)} />
                  </>
                ) : (
                  <span className="note">only its owner changes it</span>
                )}
              </td>
            </tr>
          ))}
        </DataTable>
      ) : null}
      {page ? <Pager what="triggers" offset={offset} page={page} onOffset={setOffset} /> : null}
    </section>
  );
}

export function TasksSection({ projectId }: { projectId: string }) {
  return (
    <>
      <Tasks projectId={projectId} />
      <Triggers projectId={projectId} />
    </>
  );
}
