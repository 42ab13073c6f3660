// A schema for any JSON value, named once (`JsonValue`) so the OpenAPI document shows it as one recursive type.
import { z } from 'zod';

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

const jsonLater: z.ZodType<JsonValue> = z.lazy(() => jsonValue);

export const jsonValue: z.ZodType<JsonValue> = z
  .union([z.string(), z.number(), z.boolean(), z.null(), z.array(jsonLater), z.record(z.string(), jsonLater)])
  .meta({ id: 'JsonValue', description: 'Any JSON value' });
