// Offset paging, as every list route answers it: a query asks for one row more than the page, and that row says
// whether another page follows.

export interface PageRequest {
  limit: number;
  offset: number;
}

/** The rows of one page (fetched with `limit + 1`), whether more follow, and the offset of the next page. */
export function pageOf<T>(rows: T[], request: PageRequest): { rows: T[]; has_more: boolean; next_offset: number | null } {
  const hasMore = rows.length > request.limit;
  return { rows: rows.slice(0, request.limit), has_more: hasMore, next_offset: hasMore ? request.offset + request.limit : null };
}
