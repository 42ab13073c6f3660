/** The document cannot be read as its media type says: the reason becomes the document's `failure`. */
export class UnreadableDocument extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UnreadableDocument';
  }
}
