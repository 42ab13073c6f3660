// Lists that answer a page at a time (`has_more`, `next_offset`; no total) read as one async iterator of rows.

export interface Page {
  has_more: boolean;
  next_offset: number | null;
}

/** Every row of a paged list: `fetchPage(offset)` answers a page, `rowsOf` its rows; pages are fetched as read. */
export async function* paginate<P extends Page, Row>(fetchPage: (offset: number) => Promise<P>, rowsOf: (page: P) => Row[], offset = 0): AsyncGenerator<Row> {
  for (;;) {
    const page = await fetchPage(offset);
    yield* rowsOf(page);
    if (!page.has_more || page.next_offset === null) return;
    offset = page.next_offset;
  }
}
