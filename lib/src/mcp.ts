// What both programs say of MCP servers (docs/decisions/0053), so the control plane, the runtime's tool listing,
// its probe and the skills' mcp.json say it in the same words.

/** How a stdio server is refused, wherever one is offered. */
export const STDIO_MCP_REFUSED = 'stdio MCP servers are refused: only servers reached over HTTP (Streamable HTTP or SSE) can be used';

/** An MCP server's name: the prefix of its tools' names (`<name>__<tool>`). */
export const MCP_SERVER_NAME = /^[a-z0-9][a-z0-9_-]{0,23}$/;
