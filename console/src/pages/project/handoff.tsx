// The hand-off viewer (decision 0090): a page the agent handed to the person, live. The screencast draws each
// picture as it comes; a click on the picture is a click on the page (scaled to the page's pixels), keys typed while
// the picture has the focus go to the page (Tab leaves the picture, as everywhere; the "Tab" button sends one), the
// check asks whether the task looks done, and "I'm done" ends the hand-off: the agent goes on with the page as left.
// A reader of the project (the Sessions section) watches a conversation's page the same way, without acting on it.
import { useEffect, useRef, useState, type KeyboardEvent, type MouseEvent, type WheelEvent } from 'react';
import type { BrowserFrame, BrowserInput, DataPlaneClient, Handoff, HandoffCheck } from '@agentplane/client';
import { ErrorMessage } from '../../components/error-message.js';

interface Picture {
  data: string;
  mimeType: string;
  width: number;
  height: number;
  url: string;
}

/** Keys sent as keys; a single printable character is sent as text. */
const NAMED_KEYS = new Set(['Enter', 'Backspace', 'Delete', 'Escape', 'ArrowLeft', 'ArrowRight', 'ArrowUp', 'ArrowDown', 'Home', 'End', 'PageUp', 'PageDown', ' ']);

const CHECK_WORDS: Record<HandoffCheck['result'], string> = {
  done: 'it looks done: press "I\'m done" to hand the page back',
  not_done: 'not done yet',
  stuck: 'the page seems stuck (an error or a dead end)',
  unsure: 'it cannot tell',
};

/** A wheel's travel as the service takes it: whole pixels, at most 10,000 either way. */
const clampDelta = (delta: number) => Math.max(-10_000, Math.min(10_000, Math.round(delta)));

const pictureOf = (frame: Pick<BrowserFrame, 'data' | 'width' | 'height' | 'url'> & { mime_type: string }): Picture => ({
  data: frame.data,
  mimeType: frame.mime_type,
  width: frame.width,
  height: frame.height,
  url: frame.url,
});

export function HandoffViewer({
  dataPlane,
  sessionId,
  handoff,
  onDone,
  busy,
}: {
  dataPlane: DataPlaneClient;
  sessionId: string;
  /** The hand-off, for its owner; null when a reader watches the conversation's page. */
  handoff: Handoff | null;
  onDone: () => void;
  busy: boolean;
}) {
  const [picture, setPicture] = useState<Picture | null>(null);
  const [status, setStatus] = useState('Connecting to the page…');
  const [check, setCheck] = useState<HandoffCheck | null>(null);
  const [error, setError] = useState<unknown>(null);
  const queue = useRef<Promise<void>>(Promise.resolve());
  const image = useRef<HTMLImageElement>(null);
  const canAct = handoff !== null && !handoff.read_only;

  useEffect(() => {
    const controller = new AbortController();
    void (async () => {
      try {
        for await (const event of dataPlane.browser.screencast(sessionId, { signal: controller.signal })) {
          if (event.type === 'frame') {
            setPicture(pictureOf(event.frame));
            setStatus('');
          } else if (event.type === 'closed') setStatus('The page was closed.');
        }
      } catch (failure) {
        if (!controller.signal.aborted) setError(failure);
      }
    })();
    return () => controller.abort();
  }, [dataPlane, sessionId]);

  /** Sends inputs one after another, in the order the person made them; each answer is the page's new picture. */
  function send(input: BrowserInput) {
    queue.current = queue.current.then(async () => {
      try {
        setPicture(pictureOf(await dataPlane.browser.input(sessionId, input)));
        setError(null);
      } catch (failure) {
        setError(failure);
      }
    });
  }

  /**
   * A wheel turns in many small events (a trackpad sends dozens a second): while one is on its way, the next ones add
   * up and go as one when it is answered.
   */
  const wheel = useRef<{ x: number; y: number; dx: number; dy: number } | null>(null);
  const wheeling = useRef(false);
  function onWheelAt(point: { x: number; y: number }, dx: number, dy: number) {
    const held = wheel.current;
    wheel.current = held ? { ...point, dx: held.dx + dx, dy: held.dy + dy } : { ...point, dx, dy };
    if (wheeling.current) return;
    wheeling.current = true;
    const flush = () => {
      const next = wheel.current;
      wheel.current = null;
      if (!next) {
        wheeling.current = false;
        return;
      }
      send({ type: 'wheel', x: next.x, y: next.y, delta_x: clampDelta(next.dx), delta_y: clampDelta(next.dy) });
      void queue.current.then(flush);
    };
    flush();
  }

  /** Where on the page a point of the picture is, in the page's pixels. */
  function pagePoint(event: MouseEvent<HTMLImageElement> | WheelEvent<HTMLImageElement>) {
    const box = event.currentTarget.getBoundingClientRect();
    const scale = (picture?.width ?? box.width) / box.width;
    const x = Math.min(Math.max(0, Math.round((event.clientX - box.left) * scale)), (picture?.width ?? 1280) - 1);
    const y = Math.min(Math.max(0, Math.round((event.clientY - box.top) * scale)), (picture?.height ?? 800) - 1);
    return { x, y };
  }

  function onKeyDown(event: KeyboardEvent<HTMLImageElement>) {
    if (!canAct || event.key === 'Tab') return;
    const chord = [event.ctrlKey ? 'Control' : '', event.altKey ? 'Alt' : '', event.metaKey ? 'Meta' : ''].filter(Boolean);
    if (chord.length === 0 && event.key.length === 1 && event.key !== ' ') send({ type: 'text', text: event.key });
    else if (chord.length > 0 && event.key.length === 1) send({ type: 'key', key: [...chord, event.key].join('+') });
    else if (NAMED_KEYS.has(event.key)) send({ type: 'key', key: event.key === ' ' ? 'Space' : event.key });
    else return;
    event.preventDefault();
  }

  async function askCheck() {
    setError(null);
    try {
      setCheck(await dataPlane.browser.check(sessionId));
    } catch (failure) {
      setError(failure);
    }
  }

  return (
    <section className="handoff" aria-labelledby="handoff-heading">
      <h2 id="handoff-heading">{canAct ? 'The agent handed you a page' : handoff ? 'The agent is showing you a page' : "The conversation's browser page"}</h2>
      {handoff ? <p className="instructions">{handoff.instructions}</p> : null}
      <p className="note">
        {canAct
          ? 'Click the page to act on it and type while it has the focus. Tab leaves the page; use the Tab button to press it there.'
          : handoff
            ? 'You can watch this page; the agent did not hand it to you to act on.'
            : "You are watching as a reader of the project: only the conversation's owner acts on its page."}
      </p>
      <p role="status" className="note">
        {status}
        {picture ? `On ${picture.url}` : ''}
      </p>
      {picture ? (
        <img
          ref={image}
          className="handoff-page"
          src={`data:${picture.mimeType};base64,${picture.data}`}
          width={picture.width}
          height={picture.height}
          alt={`The page handed over: ${picture.url}`}
          tabIndex={canAct ? 0 : -1}
          draggable={false}
          onClick={canAct ? (event) => {
            event.currentTarget.focus();
            send({ type: 'click', ...pagePoint(event) });
          } : undefined}
          onWheel={canAct ? (event) => onWheelAt(pagePoint(event), event.deltaX, event.deltaY) : undefined}
          onKeyDown={onKeyDown}
        />
      ) : null}
      <ErrorMessage error={error} />
      {check ? (
        <p role="status" className="note">
          The check says: {CHECK_WORDS[check.result]}.
        </p>
      ) : null}
      <div className="actions">
        {canAct ? (
          <>
            <button type="button" className="secondary" onClick={() => send({ type: 'key', key: 'Tab' })}>
              Tab
            </button>
            <button type="button" className="secondary" onClick={() => void askCheck()}>
              Check whether I'm done
            </button>
          </>
        ) : null}
        <button type="button" onClick={onDone} disabled={busy}>
          {canAct ? "I'm done" : handoff ? 'Go on' : 'Stop watching'}
        </button>
      </div>
    </section>
  );
}
