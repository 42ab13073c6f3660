// The project's overview: the readiness report as a checklist (each step says what it blocks, and a form or a link
// performs its fix), then the endpoints and the starting snippet.
import { useState, type FormEvent } from 'react';
import { Link } from 'wouter';
import { QueryState } from '../../components/query-state.js';
import { ErrorMessage } from '../../components/error-message.js';
import { useConnect, useRegisteredModels, useReadiness, useSetDefaultModel, useSetOrigins, useSetWebhook, type ReadinessReport } from '../../queries.js';

type Step = ReadinessReport['steps'][number];

/** A one-field form that performs a step's fix. */
function FixForm({ label, submitLabel, placeholder, pending, error, onSubmit }: { label: string; submitLabel: string; placeholder?: string; pending: boolean; error: unknown; onSubmit: (value: string) => void }) {
  const [value, setValue] = useState('');
  const id = `fix-${label.replace(/\W+/g, '-').toLowerCase()}`;
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    onSubmit(value.trim());
  }
  return (
    <form onSubmit={submit} className="inline">
      <label htmlFor={id}>{label}</label>
      <input id={id} value={value} placeholder={placeholder} onChange={(event) => setValue(event.target.value)} required />
      <button type="submit" disabled={pending}>
        {submitLabel}
      </button>
      <ErrorMessage error={error} />
    </form>
  );
}

function DefaultModelFix({ projectId }: { projectId: string }) {
  const setModel = useSetDefaultModel(projectId);
  const models = useRegisteredModels(projectId);
  const [model, setChosen] = useState('');
  if (models.length === 0) return <p>Register a provider first: its models are offered here.</p>;
  return (
    <form
      className="inline"
      onSubmit={(event) => {
        event.preventDefault();
        setModel.mutate(model || models[0]!);
      }}
    >
      <label htmlFor="fix-default-model">Default model</label>
      <select id="fix-default-model" value={model || models[0]} onChange={(event) => setChosen(event.target.value)}>
        {models.map((candidate) => (
          <option key={candidate}>{candidate}</option>
        ))}
      </select>
      <button type="submit" disabled={setModel.isPending}>
        Set default model
      </button>
      <ErrorMessage error={setModel.error} />
    </form>
  );
}

function OriginsFix({ projectId }: { projectId: string }) {
  const setOrigins = useSetOrigins(projectId);
  return (
    <FixForm
      label="Browser origins (comma-separated)"
      submitLabel="Allow origins"
      placeholder="https://app.example.com"
      pending={setOrigins.isPending}
      error={setOrigins.error}
      onSubmit={(value) => setOrigins.mutate(value.split(',').map((origin) => origin.trim()).filter(Boolean))}
    />
  );
}

function WebhookFix({ projectId }: { projectId: string }) {
  const setWebhook = useSetWebhook(projectId);
  return <FixForm label="Webhook URL" submitLabel="Set webhook URL" placeholder="https://hooks.example.com/agentplane" pending={setWebhook.isPending} error={setWebhook.error} onSubmit={(value) => setWebhook.mutate(value)} />;
}

/** What performs a step's fix in the console; null when the platform must (the runtime, the configuration's delivery). */
function Fix({ projectId, step }: { projectId: string; step: Step }) {
  switch (step.id) {
    case 'provider':
    case 'embedding-model':
      return <Link href={`/projects/${projectId}/providers`}>{step.id === 'provider' ? 'Register a provider' : 'Register a provider with an embedding model'}</Link>;
    case 'default-model':
      return <DefaultModelFix projectId={projectId} />;
    case 'origins':
      return <OriginsFix projectId={projectId} />;
    case 'webhook':
      return <WebhookFix projectId={projectId} />;
    case 'turns':
      return <Link href={`/projects/${projectId}/activity`}>See the failing turns</Link>;
    case 'tasks-waiting':
      return <Link href={`/projects/${projectId}/tasks`}>See the waiting tasks</Link>;
    default:
      return step.fix ? <p className="note">Fix: {step.fix}</p> : <p className="note">The platform fixes this step; it is read again every few seconds.</p>;
  }
}

function Checklist({ projectId, report }: { projectId: string; report: ReadinessReport }) {
  return (
    <>
      <p role="status" className={report.canAnswer ? 'ok' : 'error'}>
        {report.ready ? 'Ready: every step is done.' : report.canAnswer ? 'Can answer: every essential step is done.' : 'Not ready: turns cannot run yet.'}
      </p>
      <ol className="checklist" aria-label="Readiness steps">
        {report.steps.map((step) => (
          <li key={step.id} className={step.ok ? 'ok' : 'pending'}>
            <h3>
              <span aria-hidden="true">{step.ok ? '✓' : '○'}</span> {step.id}{' '}
              <span className="note">
                ({step.ok ? 'done' : 'not done'}
                {step.essential ? ', essential' : ''})
              </span>
            </h3>
            <p>{step.detail}</p>
            {step.ok ? null : (
              <>
                <p className="note">Blocks: {step.blocks}</p>
                <Fix projectId={projectId} step={step} />
              </>
            )}
          </li>
        ))}
      </ol>
    </>
  );
}

export function OverviewSection({ projectId }: { projectId: string }) {
  const readiness = useReadiness(projectId);
  const connect = useConnect(projectId);
  return (
    <>
      <section aria-labelledby="readiness-heading">
        <h2 id="readiness-heading">Readiness</h2>
        <QueryState query={readiness} what="the readiness report" />
        {readiness.data ? <Checklist projectId={projectId} report={readiness.data} /> : null}
      </section>
      <section aria-labelledby="connect-heading">
        <h2 id="connect-heading">Endpoints</h2>
        <ErrorMessage error={connect.error} />
        {connect.data ? (
          <>
            <dl>
              <dt>Control plane</dt>
              <dd>
                <code>{connect.data.control_url}</code>
              </dd>
              <dt>Data plane</dt>
              <dd>
                <code>{connect.data.data_url}</code>
              </dd>
            </dl>
            <pre aria-label="Starting snippet" tabIndex={0}>
              {connect.data.snippet}
            </pre>
          </>
        ) : null}
      </section>
    </>
  );
}
