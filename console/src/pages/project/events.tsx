// Events and deliveries: where the project's events go (the webhook URL) and the secret that signs them, each event
// delivery with its status and attempts (one delivered or dead can be sent again), and the webhook tools' handler
// calls. The lists are the newest first; "Show more" asks for a longer list, as the API takes no offset.
import { useId, useState, type FormEvent } from 'react';
import { ConfirmButton } from '../../components/confirm.js';
import { QueryState } from '../../components/query-state.js';
import { DataTable } from '../../components/data-table.js';
import { SecretPanel } from '../../components/shown-once.js';
import { ErrorMessage } from '../../components/error-message.js';
import { useSetWebhook } from '../../queries.js';
import {
  DELIVERY_STATUSES,
  MAX_LIMIT,
  PAGE_SIZE,
  useEventDeliveries,
  useRedeliver,
  useRotateWebhookSecret,
  useToolDeliveries,
  useWebhook,
  useWebhookSecret,
  type DeliveryStatus,
  type EventDelivery,
  type WebhookSecret,
} from './events-queries.js';

const when = (iso: string) => new Date(iso).toLocaleString();
const deliveryName = (delivery: EventDelivery) => `${delivery.type} delivery …${delivery.id.slice(-6)}`;

function WebhookUrl({ projectId }: { projectId: string }) {
  const webhook = useWebhook(projectId);
  const setWebhook = useSetWebhook(projectId);
  const [url, setUrl] = useState('');
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setWebhook.mutate(url.trim(), { onSuccess: () => setUrl('') });
  }
  return (
    <section aria-labelledby="webhook-heading">
      <h2 id="webhook-heading">Webhook</h2>
      <p className="note">Where turn.stopped (for unattended runs) and scheduled_task.fired are sent, signed with the secret below.</p>
      <QueryState query={webhook} what="the webhook URL" />
      {webhook.data ? (
        webhook.data.url ? (
          // A div, not a paragraph: the confirmation's dialog (a heading and blocks) is rendered inside it.
          <div>
            Events go to <code>{webhook.data.url}</code>{' '}
            <ConfirmButton
              label="Clear"
              target="the webhook URL"
              consequence="Events are no longer sent to it; deliveries still waiting for a retry are given up."
              onConfirm={() => setWebhook.mutateAsync(null)}
            />
          </div>
        ) : (
          <p>No webhook URL: events go nowhere but tasks' callback URLs.</p>
        )
      ) : null}
      <form className="inline" onSubmit={submit}>
        <label htmlFor="webhook-url">{webhook.data?.url ? 'New webhook URL' : 'Webhook URL'}</label>
        <input id="webhook-url" type="url" value={url} required placeholder="https://hooks.example.com/agentplane" onChange={(event) => setUrl(event.target.value)} />
        <button type="submit" disabled={setWebhook.isPending}>
          Set webhook URL
        </button>
        <ErrorMessage error={setWebhook.error} />
      </form>
    </section>
  );
}

/** The secret a rotation answered with, until the person has put it in their receiver. */
function RotatedSecret({ secret, onDismiss }: { secret: WebhookSecret; onDismiss: () => void }) {
  return (
    <SecretPanel
      label="New signing secret"
      value={secret.webhook_secret}
      note="deliveries are signed with it from now on, and the old one no longer verifies. Put it in your receiver now."
      onDismiss={onDismiss}
    />
  );
}

function SigningSecret({ projectId }: { projectId: string }) {
  const secret = useWebhookSecret(projectId);
  const rotate = useRotateWebhookSecret(projectId);
  const [rotated, setRotated] = useState<WebhookSecret | null>(null);
  const [shown, setShown] = useState(false);
  const valueId = useId();
  return (
    <section aria-labelledby="secret-heading">
      <h2 id="secret-heading">Signing secret</h2>
      {rotated ? <RotatedSecret secret={rotated} onDismiss={() => setRotated(null)} /> : null}
      <QueryState query={secret} what="the signing secret" />
      {secret.data ? (
        <>
          <p>
            Every delivery carries <code>X-Signature</code>, signed with this secret. Last set {when(secret.data.rotated_at)}.
          </p>
          <div className="actions">
            <button type="button" className="secondary" aria-expanded={shown} aria-controls={valueId} onClick={() => setShown(!shown)}>
              {shown ? 'Hide the secret' : 'Show the secret'}
            </button>
            <ConfirmButton
              label="Rotate"
              target="the webhook signing secret"
              consequence="A new secret signs every delivery from now on and the old one stops at once, with no overlap: a receiver still holding the old one fails to verify until it has the new one (a failed delivery is retried)."
              onConfirm={async () => {
                setRotated(await rotate.mutateAsync());
                setShown(false);
              }}
            />
          </div>
          <div id={valueId}>
            {shown ? (
              <output aria-label="Signing secret value" className="secret">
                {secret.data.webhook_secret}
              </output>
            ) : null}
          </div>
        </>
      ) : null}
    </section>
  );
}

/** Every attempt, in a disclosure; a redelivery starts a fresh budget of attempts, so those since are counted apart. */
function AttemptLog({ delivery }: { delivery: EventDelivery }) {
  const made = delivery.attempt_log.length;
  if (made === 0) return <>none yet</>;
  return (
    <details>
      <summary>
        {made} {made === 1 ? 'attempt' : 'attempts'}
        {delivery.attempts < made ? `, ${delivery.attempts} since sent again` : ''} <span className="visually-hidden">of {deliveryName(delivery)}</span>
      </summary>
      <ol>
        {delivery.attempt_log.map((attempt, index) => (
          <li key={index}>
            {when(attempt.at)}: {attempt.status === null ? 'no answer' : `HTTP ${attempt.status}`}
            {attempt.error ? ` (${attempt.error})` : ''}, {attempt.duration_ms} ms
          </li>
        ))}
      </ol>
    </details>
  );
}

function EventDeliveries({ projectId }: { projectId: string }) {
  const [status, setStatus] = useState<DeliveryStatus | undefined>(undefined);
  const [limit, setLimit] = useState(PAGE_SIZE);
  const deliveries = useEventDeliveries(projectId, limit, status);
  const redeliver = useRedeliver(projectId);
  const [said, setSaid] = useState('');
  function send(delivery: EventDelivery) {
    setSaid('');
    redeliver.mutate(delivery.id, {
      onSuccess: (queued) =>
        setSaid(`Sent ${deliveryName(delivery)} again (event ${queued.event_id}): it is ${queued.status} now, with the same event id, a fresh signature and a fresh budget of attempts.`),
    });
  }
  const rows = deliveries.data ?? [];
  return (
    <section aria-labelledby="deliveries-heading">
      <h2 id="deliveries-heading">Event deliveries</h2>
      <form className="inline" onSubmit={(event) => event.preventDefault()}>
        <label htmlFor="delivery-status">Status</label>
        <select
          id="delivery-status"
          value={status ?? ''}
          onChange={(event) => {
            setStatus((event.target.value || undefined) as DeliveryStatus | undefined);
            setLimit(PAGE_SIZE);
          }}
        >
          <option value="">any</option>
          {DELIVERY_STATUSES.map((candidate) => (
            <option key={candidate}>{candidate}</option>
          ))}
        </select>
      </form>
      <p role="status">{said}</p>
      <ErrorMessage error={redeliver.error} />
      <QueryState query={deliveries} what="event deliveries" />
      {deliveries.data && rows.length === 0 ? <p>{status ? `No ${status} deliveries.` : 'No events sent yet.'}</p> : null}
      {rows.length > 0 ? (
        <DataTable columns={['Event', 'Target', 'Status', 'Attempts', 'Last answer', 'Action']} caption="The project's event deliveries, newest first">
          {rows.map((delivery) => (
            <tr key={delivery.id}>
              <td>
                {delivery.type}
                <br />
                <span className="note">{when(delivery.created_at)}</span>
              </td>
              <td>
                {delivery.target === 'project' ? 'webhook' : 'task callback'}
                <br />
                <code>{delivery.url}</code>
              </td>
              <td>
                {delivery.status}
                {delivery.delivered_at ? <span className="note"> {when(delivery.delivered_at)}</span> : null}
                {delivery.next_attempt_at ? <span className="note"> next try {when(delivery.next_attempt_at)}</span> : null}
              </td>
              <td>
                <AttemptLog delivery={delivery} />
              </td>
              <td className={delivery.last_error ? 'error' : undefined}>{delivery.last_error ?? (delivery.last_status === null ? 'none yet' : `HTTP ${delivery.last_status}`)}</td>
              <td>
                {delivery.status === 'pending' ? (
                  <span className="note">retried on its own</span>
                ) : (
                  <button type="button" aria-label={`Redeliver ${deliveryName(delivery)}`} disabled={redeliver.isPending} onClick={() => send(delivery)}>
                    Redeliver
                  </button>
                )}
              </td>
            </tr>
          ))}
        </DataTable>
      ) : null}
      {rows.length >= limit && limit < MAX_LIMIT ? (
        <button type="button" className="secondary" disabled={deliveries.isFetching} onClick={() => setLimit(Math.min(MAX_LIMIT, limit + PAGE_SIZE))}>
          Show more deliveries
        </button>
      ) : null}
    </section>
  );
}

function ToolDeliveries({ projectId }: { projectId: string }) {
  const [limit, setLimit] = useState(PAGE_SIZE);
  const deliveries = useToolDeliveries(projectId, limit);
  const rows = deliveries.data ?? [];
  return (
    <section aria-labelledby="tool-calls-heading">
      <h2 id="tool-calls-heading">Webhook tool calls</h2>
      <QueryState query={deliveries} what="webhook tool calls" />
      {deliveries.data && rows.length === 0 ? <p>No webhook tool has been called yet.</p> : null}
      {rows.length > 0 ? (
        <DataTable columns={['When', 'Tool', 'For', 'Handler\'s answer', 'Attempts', 'Took', 'Result or error']} caption="Calls of the project's webhook tools, newest first">
          {rows.map((call) => (
            <tr key={call.id}>
              <td>{when(call.at)}</td>
              <td>{call.tool}</td>
              <td>{call.subject}</td>
              <td className={call.ok ? 'ok' : 'error'}>{call.status === null ? 'no answer' : `HTTP ${call.status}`}</td>
              <td>{call.attempts}</td>
              <td>{call.duration_ms} ms</td>
              <td>{call.error ?? call.result}</td>
            </tr>
          ))}
        </DataTable>
      ) : null}
      {rows.length >= limit && limit < MAX_LIMIT ? (
        <button type="button" className="secondary" disabled={deliveries.isFetching} onClick={() => setLimit(Math.min(MAX_LIMIT, limit + PAGE_SIZE))}>
          Show more tool calls
        </button>
      ) : null}
    </section>
  );
}

export function EventsSection({ projectId }: { projectId: string }) {
  return (
    <>
      <WebhookUrl projectId={projectId} />
      <SigningSecret projectId={projectId} />
      <EventDeliveries projectId={projectId} />
      <ToolDeliveries projectId={projectId} />
    </>
  );
}
