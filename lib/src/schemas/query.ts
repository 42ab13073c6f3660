// Numbers in a query string. `z.coerce.number()` reads an empty value (`?offset=`) as 0 and takes it; here a query
// that says nothing of a number is refused instead (422 naming it), as the document's `integer` promises. An absent
// parameter still takes the route's default. `rules` adds the number's own (`int`, `min`, `max`).
import { z } from 'zod';

export function queryNumber<T extends z.ZodType = z.ZodCoercedNumber>(rules: (number: z.ZodCoercedNumber) => T = (number) => number as unknown as T) {
  return z.preprocess((value) => (typeof value === 'string' && value.trim() === '' ? Number.NaN : value), rules(z.coerce.number()));
}
