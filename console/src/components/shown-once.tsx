// A key or secret the service returns once and never again: shown with a copy button until the person dismisses it.
// It lives in the component's state only; once dismissed (or the page left) the console has no way to show it again.
import { useState } from 'react';

export function ShownOnce({ label, value, onDismiss }: { label: string; value: string; onDismiss: () => void }) {
  const [copied, setCopied] = useState<'yes' | 'failed' | null>(null);
  async function copy() {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('yes');
    } catch {
      setCopied('failed');
    }
  }
  return (
    <div className="shown-once" role="region" aria-label={label}>
      <p>
        <strong>{label}</strong>: copy it now. It is shown this once and cannot be read again.
      </p>
      <output aria-label={`${label} value`} className="secret">
        {value}
      </output>
      <div className="actions">
        <button type="button" onClick={() => void copy()}>
          Copy {label.toLowerCase()}
        </button>
        <button type="button" className="secondary" onClick={onDismiss}>
          I have copied it
        </button>
      </div>
      <p role="status" className="note">
        {copied === 'yes' ? 'Copied to the clipboard.' : copied === 'failed' ? 'The browser refused the clipboard: select the text and copy it.' : ''}
      </p>
    </div>
  );
}
