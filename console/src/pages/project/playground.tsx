// The playground: chat with the project's agent as a test subject, on a short-lived token the console mints for it
// (decision 0085). Tokens stream in as they come, tool calls show as they start and end, and a turn that pauses
// (approvals, questions, client tool calls) asks for its answers here, a page the agent hands over opens in the
// hand-off viewer; the session can be opened afterwards.
import { useRef, useState, type FormEvent } from 'react';
import { Link } from 'wouter';
import { StreamError, type ChatRequest, type ChatStream, type DataPlane } from '@agentplane/client';
import { ErrorMessage } from '../../components/error-message.js';
import { useDataPlane } from '../../data-plane.js';
import { useRegisteredModels } from '../../queries.js';
import { useSession } from '../../session.js';
import { HandoffViewer } from './handoff.js';

type ChatResponse = DataPlane.components['schemas']['ChatResponse'];

type Entry =
  | { kind: 'user'; text: string }
  | { kind: 'assistant'; text: string; done: boolean }
  | { kind: 'tool'; id: string; name: string; arguments: string; result: string | null; ok: boolean | null };

/** The answers a paused turn waits for, as the next request carries them. */
type Resolution = Pick<ChatRequest, 'approval_decisions' | 'question_answers' | 'tool_results'>;

function Transcript({ entries }: { entries: Entry[] }) {
  return (
    <div role="log" aria-label="Conversation">
      <ol className="transcript">
      {entries.map((entry, index) => (
        <li key={index} className={entry.kind}>
          {entry.kind === 'user' ? (
            <>
              <span className="who">You</span> {entry.text}
            </>
          ) : entry.kind === 'assistant' ? (
            <>
              <span className="who">Agent</span> <span className="answer">{entry.text}</span>
              {entry.done ? null : <span className="note"> (answering…)</span>}
            </>
          ) : (
            <>
              <span className="who">Tool {entry.name}</span> <code>{entry.arguments}</code>
              <br />
              {entry.result === null ? <span className="note">running…</span> : <span className={entry.ok ? 'ok' : 'error'}>{entry.ok ? 'returned' : 'failed'}: {entry.result}</span>}
            </>
          )}
        </li>
      ))}
      </ol>
    </div>
  );
}

/** What a paused turn asks, each with the control that answers it. */
function PauseForm({ pause, pending, onResolve }: { pause: ChatResponse; pending: boolean; onResolve: (resolution: Resolution) => void }) {
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    onResolve({
      ...(pause.approvals.length ? { approval_decisions: pause.approvals.map((approval) => ({ tool_call_id: approval.tool_call_id, approved: form.get(`approval-${approval.tool_call_id}`) === 'approve' })) } : {}),
      ...(pause.questions.length ? { question_answers: pause.questions.map((question) => ({ tool_call_id: question.tool_call_id, answer: String(form.get(`answer-${question.tool_call_id}`) ?? '') })) } : {}),
      ...(pause.tool_calls.length ? { tool_results: pause.tool_calls.map((call) => ({ tool_call_id: call.id, content: String(form.get(`result-${call.id}`) ?? '') })) } : {}),
    });
  }
  return (
    <form onSubmit={submit} className="pause" aria-labelledby="pause-heading">
      <h2 id="pause-heading">The agent is waiting for you</h2>
      {pause.approvals.map((approval) => (
        <fieldset key={approval.tool_call_id}>
          <legend>
            Approve {approval.tool ?? 'the action'}: {approval.action}
          </legend>
          <pre>{approval.detail}</pre>
          <label className="choice">
            <input type="radio" name={`approval-${approval.tool_call_id}`} value="approve" defaultChecked /> Approve
          </label>
          <label className="choice">
            <input type="radio" name={`approval-${approval.tool_call_id}`} value="refuse" /> Refuse
          </label>
        </fieldset>
      ))}
      {pause.questions.map((question) => (
        <div key={question.tool_call_id}>
          <label htmlFor={`answer-${question.tool_call_id}`}>{question.question}</label>
          <input id={`answer-${question.tool_call_id}`} name={`answer-${question.tool_call_id}`} list={question.options?.length ? `options-${question.tool_call_id}` : undefined} required />
          {question.options?.length ? (
            <datalist id={`options-${question.tool_call_id}`}>
              {question.options.map((option) => (
                <option key={option} value={option} />
              ))}
            </datalist>
          ) : null}
        </div>
      ))}
      {pause.tool_calls.map((call) => (
        <div key={call.id}>
          <label htmlFor={`result-${call.id}`}>
            Result of client tool {call.name}({JSON.stringify(call.arguments)})
          </label>
          <textarea id={`result-${call.id}`} name={`result-${call.id}`} rows={3} required />
        </div>
      ))}
      <button type="submit" disabled={pending}>
        Send and go on
      </button>
    </form>
  );
}

function Conversation({ projectId, subject, model }: { projectId: string; subject: string; model: string }) {
  const dataPlane = useDataPlane(projectId, { subject });
  const [entries, setEntries] = useState<Entry[]>([]);
  const [sessionId, setSessionId] = useState<string | null>(null);
  const [pause, setPause] = useState<ChatResponse | null>(null);
  const [running, setRunning] = useState<ChatStream | null>(null);
  const [status, setStatus] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [message, setMessage] = useState('');
  const input = useRef<HTMLTextAreaElement>(null);

  /** Runs one turn as a stream, drawing each frame as it comes. */
  async function run(request: ChatRequest) {
    setError(null);
    setPause(null);
    setStatus('The agent is answering…');
    const stream = dataPlane.chat.stream({ ...request, ...(model ? { model } : {}), ...(sessionId ? { session_id: sessionId } : {}) });
    setRunning(stream);
    const update = (change: (entries: Entry[]) => Entry[]) => setEntries((current) => change([...current]));
    try {
      for await (const frame of stream) {
        if (frame.type === 'start') {
          setSessionId(frame.session_id);
        } else if (frame.type === 'token') {
          // Text after a tool call is a new part of the answer, drawn below the call.
          update((list) => {
            const last = list[list.length - 1];
            if (last?.kind === 'assistant' && !last.done) list[list.length - 1] = { ...last, text: last.text + frame.text };
            else list.push({ kind: 'assistant', text: frame.text, done: false });
            return list;
          });
        } else if (frame.type === 'tool_start') {
          update((list) => [...list.map((entry) => (entry.kind === 'assistant' ? { ...entry, done: true } : entry)), { kind: 'tool', id: frame.tool_call_id, name: frame.name, arguments: JSON.stringify(frame.arguments), result: null, ok: null }]);
        } else if (frame.type === 'tool_end') {
          update((list) => list.map((entry) => (entry.kind === 'tool' && entry.id === frame.tool_call_id ? { ...entry, result: frame.result, ok: frame.ok } : entry)));
        } else if (frame.type === 'done') {
          setSessionId(frame.session_id);
          update((list) => {
            const last = list[list.length - 1];
            // The final content is the turn's answer, whatever tokens a reconnect may have missed.
            if (last?.kind === 'assistant' && !last.done) list[list.length - 1] = { kind: 'assistant', text: frame.content || last.text, done: true };
            else if (frame.content) list.push({ kind: 'assistant', text: frame.content, done: true });
            return list;
          });
          setPause(frame.requires_action ? frame : null);
          setStatus(frame.requires_action ? 'The agent is waiting for you.' : `Answered${frame.finish_reason ? ` (finish reason: ${frame.finish_reason})` : ''}.`);
        }
      }
    } catch (failure) {
      setError(failure);
      setStatus(failure instanceof StreamError && !failure.terminal ? 'The connection was lost.' : 'The turn failed.');
      update((list) => list.map((entry) => (entry.kind === 'assistant' && !entry.done ? { ...entry, done: true } : entry)));
    } finally {
      setRunning(null);
      input.current?.focus();
    }
  }

  function say(text: string) {
    setEntries((list) => [...list, { kind: 'user', text }]);
    void run({ message: text });
  }

  function send(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const text = message.trim();
    if (!text) return;
    setMessage('');
    say(text);
  }

  const handoff = pause?.handoffs?.[0];
  const answers = pause ? pause.approvals.length + pause.questions.length + pause.tool_calls.length : 0;
  // A hand-off alone is ended by the person's next message: the box stays open for it.
  const blocked = pause !== null && answers > 0;

  return (
    <>
      <Transcript entries={entries} />
      <p role="status" className="note">
        {status}
      </p>
      <ErrorMessage error={error} />
      {pause && !running && handoff && sessionId ? (
        <HandoffViewer dataPlane={dataPlane} sessionId={sessionId} handoff={handoff} busy={running !== null} onDone={() => say(handoff.read_only ? 'I have seen the page.' : "I'm done with the page.")} />
      ) : null}
      {pause && !running && answers > 0 ? <PauseForm pause={pause} pending={running !== null} onResolve={(resolution) => void run(resolution)} /> : null}
      <form onSubmit={send} aria-label="Message the agent">
        <label htmlFor="playground-message">Message</label>
        <textarea
          id="playground-message"
          ref={input}
          rows={3}
          value={message}
          onChange={(event) => setMessage(event.target.value)}
          onKeyDown={(event) => {
            // Enter sends, Shift+Enter starts a new line, as chat boxes do.
            if (event.key === 'Enter' && !event.shiftKey) {
              event.preventDefault();
              event.currentTarget.form?.requestSubmit();
            }
          }}
          disabled={blocked}
        />
        <div className="actions">
          <button type="submit" disabled={running !== null || blocked}>
            Send
          </button>
          {running ? (
            <button type="button" className="secondary" onClick={() => void running.cancel()}>
              Stop the turn
            </button>
          ) : null}
          <button
            type="button"
            className="secondary"
            disabled={running !== null}
            onClick={() => {
              setEntries([]);
              setSessionId(null);
              setPause(null);
              setStatus('');
            }}
          >
            New conversation
          </button>
        </div>
      </form>
      {sessionId ? (
        <p>
          Session <code>{sessionId}</code>:{' '}
          <Link href={`/projects/${projectId}/sessions?session=${sessionId}`}>open the session</Link>
        </p>
      ) : null}
    </>
  );
}

export function PlaygroundSection({ projectId }: { projectId: string }) {
  const { session } = useSession();
  const models = useRegisteredModels(projectId);
  const [subject, setSubject] = useState(`playground:${session?.email.split('@')[0] ?? 'tester'}`);
  const [model, setModel] = useState('');
  return (
    <>
      <p className="note">
        The console mints a token for the test subject that lives 15 minutes and never leaves this tab; the conversation is the subject's, like any end-user's.
      </p>
      <div className="inline-fields">
        <div>
          <label htmlFor="playground-subject">Test subject</label>
          <input id="playground-subject" value={subject} onChange={(event) => setSubject(event.target.value)} required maxLength={200} />
        </div>
        <div>
          <label htmlFor="playground-model">Model</label>
          <select id="playground-model" value={model} onChange={(event) => setModel(event.target.value)}>
            <option value="">(the project's default)</option>
            {models.map((candidate) => (
              <option key={candidate}>{candidate}</option>
            ))}
          </select>
        </div>
      </div>
      {/* A new subject is a new end-user: its conversation starts afresh. */}
      {subject.trim() ? <Conversation key={subject.trim()} projectId={projectId} subject={subject.trim()} model={model} /> : <p>Name a test subject to chat.</p>}
    </>
  );
}
