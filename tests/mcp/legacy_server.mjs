// Upstream MCP server of the handshake era (initialize, Mcp-Session-Id), built
// on the official TypeScript SDK, which speaks nothing newer than 2025-11-25.
// Run as `node legacy_server.mjs PORT` (0 picks a free port).
//
// Its answer to a modern-era POST (MCP-Protocol-Version: 2026-07-28, no
// session, no initialize), which the gateway's upstream client reads as "this
// server is legacy, fall back to initialize":
//   HTTP 400, content-type application/json, body
//   {"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}
// That answer comes from the routing below, copied from the SDK's own examples
// (examples/server/*StreamableHttp.js), so real TypeScript servers answer alike.
//
// Responses come as SSE (the SDK's default). Like the Python SDK, this one answers
// an unknown tool with a result, not the spec's -32602 error:
//   {"content":[{"type":"text","text":"MCP error -32602: Tool NAME not found"}],"isError":true}
// `grow` changes the process for good: every session from then on lists `extra`.
// `count` sends one notifications/progress per step when the call has a progressToken.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';

const text = t => ({ content: [{ type: 'text', text: t }] });

// One McpServer per session, as the SDK's examples do; `grow` must therefore
// reach every live session's server, and sessions opened later start grown.
const sessions = new Map(); // session id -> { transport, server }
let grown = false;

function addExtra(server) {
    // Registering on a connected McpServer makes it send
    // notifications/tools/list_changed on that session's GET stream.
    server.registerTool('extra', { description: 'Appears once grow was called' }, async () => text('extra called'));
}

function makeServer() {
    const server = new McpServer({ name: 'legacy', version: '1.0.0' });
    server.registerTool(
        'search',
        { description: 'Pretend search', inputSchema: { query: z.string() } },
        async ({ query }) => text(`results for ${query}`)
    );
    server.registerTool(
        'add',
        { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } },
        async ({ a, b }) => text(String(a + b))
    );
    server.registerTool(
        'count',
        { description: 'Counts to n, telling its progress', inputSchema: { n: z.number().int().min(0).max(100) } },
        async ({ n }, extra) => {
            // Sent on this request's SSE stream (the SDK relates it to the request).
            const progressToken = extra._meta?.progressToken;
            for (let i = 1; i <= n; i++) {
                if (progressToken !== undefined) {
                    await extra.sendNotification({
                        method: 'notifications/progress',
                        params: { progressToken, progress: i, total: n, message: `counted ${i}` }
                    });
                }
            }
            return text(`counted to ${n}`);
        }
    );
    server.registerTool('grow', { description: 'Registers the tool extra' }, async () => {
        if (!grown) {
            grown = true;
            for (const s of sessions.values()) addExtra(s.server);
        }
        return text('grown');
    });
    if (grown) addExtra(server);
    return server;
}

function sendJson(res, status, code, message) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function readJson(req) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function handle(req, res) {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') return sendJson(res, 404, -32000, 'Not Found');
    const sid = req.headers['mcp-session-id'];
    const session = sid ? sessions.get(sid) : undefined;
    if (req.method !== 'POST') {
        // GET (the notification stream) and DELETE (end of session) need a session.
        if (!session) return sendJson(res, sid ? 404 : 400, sid ? -32001 : -32000, sid ? 'Session not found' : 'Bad Request: No valid session ID provided');
        return session.transport.handleRequest(req, res);
    }
    let body;
    try {
        body = await readJson(req);
    } catch {
        return sendJson(res, 400, -32700, 'Parse error');
    }
    if (session) return session.transport.handleRequest(req, res, body);
    if (sid) return sendJson(res, 404, -32001, 'Session not found');
    if (!isInitializeRequest(body)) return sendJson(res, 400, -32000, 'Bad Request: No valid session ID provided');
    const server = makeServer();
    const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: id => sessions.set(id, { transport, server })
    });
    transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
}

const httpServer = createServer((req, res) => {
    handle(req, res).catch(err => {
        console.error(err);
        if (!res.headersSent) sendJson(res, 500, -32603, 'Internal error');
        else res.end();
    });
});
httpServer.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
    console.log(`listening http://127.0.0.1:${httpServer.address().port}/mcp`);
});
