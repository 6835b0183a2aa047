#!/usr/bin/env node
// An MCP server of protocol 2026-07-28 only, built on the TypeScript SDK v2
// (@modelcontextprotocol/server) with legacy traffic rejected: initialize
// and other 2025-era requests get the unsupported-protocol-version error.
//
//   node modern-server.mjs            stdio
//   node modern-server.mjs --http     streamable HTTP on a free loopback port;
//                                     prints "listening on http://127.0.0.1:PORT/mcp" on stderr
//   --dual                            serve 2025-era clients too (the SDK's default)
//
// Tools: echo {message} answers the message; add {a, b} answers the sum;
// log {} sends a log message at debug, info and error (each only when the
// request's log level asks for it, as the SDK does) and answers "logged";
// reading the resource log://note does the same and answers "note".
// --calls-log FILE appends every tools/call as a JSON line {time, tool, arguments}.
import { appendFileSync } from "node:fs";
import { createServer } from "node:http";
import { McpServer, createMcpHandler } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import * as z from "zod/v4";

const args = process.argv.slice(2);
const callsLog = args.includes("--calls-log") ? args[args.indexOf("--calls-log") + 1] : "";

function logCall(tool, args) {
  if (callsLog) {
    appendFileSync(callsLog, JSON.stringify({ time: new Date().toISOString(), tool, arguments: args }) + "\n");
  }
}

function factory() {
  const server = new McpServer({ name: "modern-only", version: "2.4.0" }, { capabilities: { tools: {}, logging: {}, resources: {} } });
  server.registerTool("echo", { description: "Echo the message", inputSchema: z.object({ message: z.string() }) },
    async ({ message }) => { logCall("echo", { message }); return { content: [{ type: "text", text: message }] }; });
  server.registerTool("add", { description: "Add two numbers", inputSchema: z.object({ a: z.number(), b: z.number() }) },
    async ({ a, b }) => { logCall("add", { a, b }); return { content: [{ type: "text", text: String(a + b) }] }; });
  server.registerTool("log", { description: "Log at debug, info and error", inputSchema: z.object({}) },
    async (_args, ctx) => {
      logCall("log", {});
      for (const level of ["debug", "info", "error"]) await ctx.mcpReq.log(level, `${level} message`, "modern-only");
      return { content: [{ type: "text", text: "logged" }] };
    });
  server.registerResource("note", "log://note", { mimeType: "text/plain" }, async (uri, ctx) => {
    for (const level of ["debug", "info", "error"]) await ctx.mcpReq.log(level, `${level} message`, "modern-only");
    return { contents: [{ uri: uri.href, text: "note" }] };
  });
  return server;
}

const dual = args.includes("--dual");
if (!args.includes("--http")) {
  serveStdio(factory, { legacy: dual ? "serve" : "reject" });
} else {
  const handler = createMcpHandler(factory, { legacy: dual ? "stateless" : "reject" });
  // node:http in front of the web-standard handler (Node 20 has no
  // toNodeHandler without @modelcontextprotocol/node).
  const http = createServer(async (req, res) => {
    try {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const body = Buffer.concat(chunks);
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) {
        if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
        else if (v !== undefined) headers.set(k, v);
      }
      const ac = new AbortController();
      res.on("close", () => ac.abort());
      const request = new Request(`http://${req.headers.host}${req.url}`, {
        method: req.method, headers, body: ["GET", "HEAD"].includes(req.method) ? undefined : body, signal: ac.signal,
      });
      const response = await handler.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
      if (response.body) {
        for await (const chunk of response.body) res.write(chunk);
      }
      res.end();
    } catch (e) {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(e));
    }
  });
  http.listen(0, "127.0.0.1", () => {
    process.stderr.write(`listening on http://127.0.0.1:${http.address().port}/mcp\n`);
  });
}
