#!/usr/bin/env node
// A scripted MCP agent built on the TypeScript SDK v2 client
// (@modelcontextprotocol/client), which speaks 2026-07-28 and the 2025 era.
// It prints what agent.mjs prints, for the steps listTools, callTool,
// request, ping and parallel; a script's "elicitation" and "sampling" answers declare
// those capabilities and answer every such request (including the input
// requests of a 2026-07-28 multi-round result, which the SDK fulfils and
// retries by itself):
//
//   node agent-v2.mjs --negotiation legacy|auto|2026-07-28 [--url URL [--token T]]
//                     [--script FILE|-] [--timeout MS] [-- COMMAND ARGS...]
//
// --negotiation is the client's versionNegotiation: legacy (the SDK's
// default), auto (probe with server/discover, fall back to initialize), or a
// revision to pin. The connect line carries "era": the protocol era the
// connection negotiated ("modern" or "legacy") and "protocolVersion".
import { readFileSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function exit(code) {
  process.stdout.write("", () => process.exit(code));
}

function parseArgs(argv) {
  const o = { url: null, token: null, script: "-", timeout: 60000, command: null, args: [], negotiation: "legacy" };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--") {
      o.command = argv[i + 1] ?? null;
      o.args = argv.slice(i + 2);
      break;
    } else if (a === "--url") o.url = next();
    else if (a === "--token") o.token = next();
    else if (a === "--negotiation") o.negotiation = next();
    else if (a === "--script") o.script = next();
    else if (a === "--timeout") o.timeout = Number(next());
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.url && !o.command) throw new Error("give --url URL or -- COMMAND ARGS...");
  if (o.url && o.command) throw new Error("give either --url or a command, not both");
  return o;
}

function errorOf(err) {
  const e = { code: typeof err?.code === "number" ? err.code : null, message: String(err?.message ?? err) };
  if (err?.data !== undefined) e.data = err.data;
  if (err?.name) e.name = err.name;
  return e;
}

function textOf(result) {
  if (!Array.isArray(result?.content)) return "";
  return result.content.filter((c) => c.type === "text").map((c) => c.text).join("");
}

async function runStep(client, step, id, timeout) {
  const base = { step: id, op: step.op };
  const opts = { timeout: step.timeoutMs ?? timeout };
  try {
    switch (step.op) {
      case "listTools": {
        const result = await client.listTools({}, opts);
        return { ...base, ok: true, result, tools: result.tools.map((t) => t.name) };
      }
      case "callTool": {
        const params = { name: step.name };
        if (step.arguments !== undefined) params.arguments = step.arguments;
        const result = await client.callTool(params, opts);
        return { ...base, name: step.name, ok: true, isError: result.isError === true, text: textOf(result), result };
      }
      case "request": {
        const result = await client.request({ method: step.method, params: step.params ?? {} }, opts);
        return { ...base, method: step.method, ok: true, result };
      }
      case "ping": {
        await client.ping(opts);
        return { ...base, ok: true };
      }
      case "parallel": {
        // Concurrently, each sub-step's line printed before this one.
        const results = await Promise.all((step.steps ?? []).map((s, j) => runStep(client, s, `${id}.${j}`, timeout)));
        for (const r of results) emit(r);
        return { ...base, ok: true, count: results.length };
      }
      default:
        throw new Error(`agent-v2 does not run step op ${step.op}`);
    }
  } catch (err) {
    return { ...base, name: step.name, ok: false, error: errorOf(err) };
  }
}

let o;
let script;
try {
  o = parseArgs(process.argv.slice(2));
  const raw = readFileSync(o.script === "-" ? 0 : o.script, "utf8");
  script = JSON.parse(raw);
  if (Array.isArray(script)) script = { steps: script };
} catch (err) {
  emit({ op: "script", ok: false, error: errorOf(err) });
  exit(1);
}
if (script) {
  const mode = o.negotiation === "legacy" || o.negotiation === "auto" ? o.negotiation : { pin: o.negotiation };
  const capabilities = {};
  if (script.elicitation) capabilities.elicitation = {};
  if (script.sampling) capabilities.sampling = {};
  const client = new Client({ name: "planlock-test-agent-v2", version: "1.0.0" }, { versionNegotiation: { mode }, capabilities });
  if (script.elicitation) {
    client.setRequestHandler("elicitation/create", (request) => {
      emit({ op: "serverRequest", method: "elicitation/create", params: request.params });
      const a = { action: script.elicitation.action };
      if (script.elicitation.content !== undefined) a.content = script.elicitation.content;
      return a;
    });
  }
  if (script.sampling) {
    client.setRequestHandler("sampling/createMessage", (request) => {
      emit({ op: "serverRequest", method: "sampling/createMessage", params: request.params });
      return { role: "assistant", content: { type: "text", text: script.sampling.text }, model: "planlock-test" };
    });
  }
  let transport;
  if (o.url) {
    const headers = o.token ? { Authorization: `Bearer ${o.token}` } : {};
    transport = new StreamableHTTPClientTransport(new URL(o.url), { requestInit: { headers } });
  } else {
    transport = new StdioClientTransport({ command: o.command, args: o.args, env: process.env, stderr: "inherit" });
  }
  try {
    await client.connect(transport, { timeout: o.timeout });
    emit({ op: "connect", ok: true, server: client.getServerVersion() ?? null, era: client.getProtocolEra() ?? null,
      protocolVersion: client.getNegotiatedProtocolVersion() ?? null });
    for (let i = 0; i < (script.steps ?? []).length; i++) {
      emit(await runStep(client, script.steps[i], String(i), o.timeout));
    }
    await client.close();
    exit(0);
  } catch (err) {
    emit({ op: "connect", ok: false, error: errorOf(err) });
    try { await client.close(); } catch {}
    exit(1);
  }
}
