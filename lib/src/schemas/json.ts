// A schema for any JSON value, named once (`JsonValue`) so the OpenAPI document shows it as one recursive type.
import { z } from 'zod';

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

const jsonLater: z.ZodType<JsonValue> = z.lazy(() => jsonValue);

export const jsonValue: z.ZodType<JsonValue> = z
  .union([z.string(), z.number(), z.boolean(), z.null(), z.array(jsonLater), z.record(z.string(), jsonLater)])
  .meta({ id: 'JsonValue', description: 'Any JSON value' });

/** Whether `value` nests deeper than `limit` levels (walked without recursion, so no depth overflows the stack). */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth >= limit) return true;
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return false;
}
