// Every destructive action names its target and asks before it acts: a button that opens a modal dialog saying what
// will happen to what, with the action's own verb on the confirming button and Cancel taking the focus first.
import { useId, useRef, useState, type ReactNode } from 'react';
import { ErrorMessage } from './error-message.js';

export interface ConfirmButtonProps {
  /** The button's text, such as "Revoke". */
  label: string;
  /** What is acted on, named in the button's accessible name and in the question: "key ci-bot (…a1b2)". */
  target: string;
  /** What will happen, said plainly: "Calls made with it are refused at once." */
  consequence: ReactNode;
  /** Acts; a rejection is shown in the dialog and keeps it open. */
  onConfirm: () => Promise<unknown>;
  disabled?: boolean;
}

export function ConfirmButton({ label, target, consequence, onConfirm, disabled }: ConfirmButtonProps) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const titleId = useId();

  async function confirm() {
    setPending(true);
    setError(null);
    try {
      await onConfirm();
      dialog.current?.close();
    } catch (failure) {
      setError(failure);
    } finally {
      setPending(false);
    }
  }

  return (
    <>
      <button type="button" className="danger" disabled={disabled} aria-label={`${label} ${target}`} onClick={() => dialog.current?.showModal()}>
        {label}
      </button>
      <dialog ref={dialog} aria-labelledby={titleId} onClose={() => setError(null)}>
        <h2 id={titleId}>
          {label} {target}?
        </h2>
        <p>{consequence}</p>
        <ErrorMessage error={error} />
        <div className="actions">
          {/* Cancel comes first and takes the focus: Enter on an opened dialog does not destroy anything. */}
          <button type="button" className="secondary" autoFocus onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button type="button" className="danger" disabled={pending} onClick={() => void confirm()}>
            {pending ? `${label}…` : `${label} ${target}`}
          </button>
        </div>
      </dialog>
    </>
  );
}
