// A key or secret the service returns once and never again: shown with a copy button until the person dismisses it.
// It lives in the component's state only; once dismissed (or the page left) the console has no way to show it again.
import type { ReactNode } from 'react';
import { CopyButton } from './copy-button.js';

/** A secret with a copy button and a way to put it away; `note` says what to do with it. */
export function SecretPanel({ label, value, note, onDismiss }: { label: string; value: string; note: ReactNode; onDismiss: () => void }) {
  return (
    <div className="shown-once" role="region" aria-label={label}>
      <p>
        <strong>{label}</strong>: {note}
      </p>
      <output aria-label={`${label} value`} className="secret">
        {value}
      </output>
      <div className="actions">
        <CopyButton value={value} label={`Copy ${label.toLowerCase()}`} />
        <button type="button" className="secondary" onClick={onDismiss}>
          I have copied it
        </button>
      </div>
    </div>
  );
}

export function ShownOnce({ label, value, onDismiss }: { label: string; value: string; onDismiss: () => void }) {
  return <SecretPanel label={label} value={value} note="copy it now. It is shown this once and cannot be read again." onDismiss={onDismiss} />;
}
