// What both programs say of MCP servers (docs/decisions/0053), so the control plane, the runtime's tool listing,
// its probe, its pushed configuration and the skills' mcp.json say it in the same words and check it the same way.
import { z } from 'zod';
import { malformedUnless } from './http/routes.js';
import { isRedacted, redactedSecretMessage } from './schemas/redaction.js';

/** How a stdio server is refused, wherever one is offered. */
export const STDIO_MCP_REFUSED = 'stdio MCP servers are refused: only servers reached over HTTP (Streamable HTTP or SSE) can be used';

/** An MCP server's name: the prefix of its tools' names (`<name>__<tool>`). */
export const MCP_SERVER_NAME = /^[a-z0-9][a-z0-9_-]{0,23}$/;

/** What a static header may be named. */
export const MCP_HEADER_NAME = /^[A-Za-z0-9-]{1,128}$/;
/** What it may hold: visible ASCII, spaces and tabs (a control character would split the request), at most 8 KiB. */
export const MCP_HEADER_VALUE = /^[\x20-\x7e\t]{1,8192}$/;

/** A server's static headers, as every surface that takes them checks them (each adds its own bounds and words). */
export const mcpHeaderEntries = () =>
  z.record(
    z.string().regex(MCP_HEADER_NAME, 'header names are letters, digits and -'),
    z
      .string()
      .regex(MCP_HEADER_VALUE, 'a header value is 1-8192 visible ASCII characters, spaces or tabs')
      .refine((value) => !isRedacted(value), `headers ${redactedSecretMessage}`),
  );

/** A body field of a stdio server's shape (`command`, `args`, `type`): 400 whatever its value. */
export const stdioField = () =>
  malformedUnless((_value): _value is never => false, STDIO_MCP_REFUSED)
    .meta({ not: {}, description: `Refused with 400: ${STDIO_MCP_REFUSED}` })
    .optional();
