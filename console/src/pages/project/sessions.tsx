// Every conversation in the project, newest first: filtered by subject, with subagents' working conversations behind
// a switch, a page at a time; choosing one shows its messages (`?session=` in the path, so the playground links here).
import { useState, type FormEvent } from 'react';
import { Link, useSearch } from 'wouter';
import { QueryState } from '../../components/query-state.js';
import { DataTable } from '../../components/data-table.js';
import { useProjectSessions, useSessionMessages, type SessionFilter } from '../../queries.js';
import { useProjectReader } from '../../data-plane.js';
import { useSession } from '../../session.js';
import { HandoffViewer } from './handoff.js';

/** The conversation's browser page, watched as the console's reader of the project (it may not act on it). */
function PageWatcher({ projectId, sessionId, onClose }: { projectId: string; sessionId: string; onClose: () => void }) {
  const { session } = useSession();
  const reader = useProjectReader(projectId, session?.email ?? 'reader');
  return <HandoffViewer dataPlane={reader} sessionId={sessionId} handoff={null} onDone={onClose} busy={false} />;
}

function Messages({ projectId, sessionId }: { projectId: string; sessionId: string }) {
  const messages = useSessionMessages(projectId, sessionId);
  const [watching, setWatching] = useState(false);
  return (
    <section aria-labelledby="messages-heading">
      <h2 id="messages-heading">
        Messages of session <code>{sessionId}</code>
      </h2>
      {watching ? (
        <PageWatcher projectId={projectId} sessionId={sessionId} onClose={() => setWatching(false)} />
      ) : (
        <button type="button" className="secondary" onClick={() => setWatching(true)}>
          Watch its browser page
        </button>
      )}
      <QueryState query={messages} what="messages" />
      {messages.data?.length === 0 ? <p>No messages.</p> : null}
      <ol className="transcript" aria-label="Messages">
        {messages.data?.map((message) => (
          <li key={message.id} className={message.role}>
            <span className="who">
              {message.role === 'tool' ? `Tool ${message.name ?? ''}` : message.role === 'user' ? `User ${message.subject}` : `Agent${message.model ? ` (${message.model})` : ''}`}
            </span>{' '}
            <span className="note">{new Date(message.created_at).toLocaleString()}</span>
            <div className="content">{message.content}</div>
            {message.tool_calls?.map((call) => (
              <div key={call.id} className="note">
                called {call.name} <code>{typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments)}</code>
              </div>
            ))}
          </li>
        ))}
      </ol>
    </section>
  );
}

export function SessionsSection({ projectId }: { projectId: string }) {
  const chosen = new URLSearchParams(useSearch()).get('session');
  const [filter, setFilter] = useState<SessionFilter>({ includeSubagents: false, subject: '' });
  const [offsets, setOffsets] = useState<number[]>([0]);
  const offset = offsets[offsets.length - 1]!;
  const sessions = useProjectSessions(projectId, filter, offset);

  function filterBy(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setFilter((current) => ({ ...current, subject: String(new FormData(event.currentTarget).get('subject') ?? '').trim() }));
    setOffsets([0]);
  }

  return (
    <>
      {chosen ? <Messages projectId={projectId} sessionId={chosen} /> : null}
      <section aria-labelledby="sessions-heading">
        <h2 id="sessions-heading">Sessions</h2>
        <form onSubmit={filterBy} className="inline">
          <label htmlFor="sessions-subject">Subject</label>
          <input id="sessions-subject" name="subject" defaultValue={filter.subject} placeholder="every subject" />
          <button type="submit">Filter</button>
        </form>
        <label className="choice">
          <input
            type="checkbox"
            checked={filter.includeSubagents}
            onChange={(event) => {
              setFilter((current) => ({ ...current, includeSubagents: event.target.checked }));
              setOffsets([0]);
            }}
          />{' '}
          Show subagents' working conversations
        </label>
        <QueryState query={sessions} what="sessions" />
        {sessions.data?.sessions.length === 0 ? <p>No sessions{filter.subject ? ` of ${filter.subject}` : ''} yet.</p> : null}
        {sessions.data && sessions.data.sessions.length > 0 ? (
          <DataTable columns={['Session', 'Subject', 'Status', 'Model', 'Updated']} caption="The project's sessions">
            {sessions.data.sessions.map((session) => (
              <tr key={session.id} aria-current={session.id === chosen ? 'true' : undefined}>
                <td>
                  <Link href={`/projects/${projectId}/sessions?session=${session.id}`}>{session.title || session.id}</Link>
                  {session.parent_session_id ? <span className="note"> (subagent of {session.parent_session_id.slice(0, 8)})</span> : null}
                </td>
                <td>{session.user_ref}</td>
                <td>{session.status}</td>
                <td>{session.model ?? ''}</td>
                <td>{new Date(session.updated_at).toLocaleString()}</td>
              </tr>
            ))}
          </DataTable>
        ) : null}
        <div className="actions">
          <button type="button" className="secondary" disabled={offsets.length === 1} onClick={() => setOffsets((list) => list.slice(0, -1))}>
            Newer
          </button>
          <button
            type="button"
            className="secondary"
            disabled={!sessions.data?.has_more || sessions.data.next_offset === null}
            onClick={() => setOffsets((list) => [...list, sessions.data!.next_offset!])}
          >
            Older
          </button>
        </div>
      </section>
    </>
  );
}
