#!/usr/bin/env node
// A scripted MCP agent built on the official TypeScript SDK client. planlock's
// Go tests drive it the way a real agent drives an MCP server.
//
//   node agent.mjs [--url URL [--token T | --oauth-issuer ISS (--oauth-client-id ID --oauth-client-secret S | --oauth-code)]]
//                  [--script FILE|-] [--timeout MS] [-- COMMAND ARGS...]
//
// Transport: streamable HTTP with --url (optional bearer --token), otherwise
// stdio to COMMAND ARGS (started with this process's environment).
// With --oauth-issuer the SDK's own OAuth support gets the token: on the
// server's 401 it reads the protected resource metadata, discovers the
// authorization server and gets a token, with the client_credentials grant
// (--oauth-client-id/--oauth-client-secret) or, with --oauth-code, dynamic
// registration and the authorization code grant with PKCE against an
// authorization server that approves without a login page (a test's).
// The script (JSON, from FILE or stdin) is either an array of steps or
//   {"steps": [...], "sampling": {"text": "..."}, "elicitation": {"action": "accept", "content": {...}},
//    "connectTimeoutMs": MS}
// where sampling/elicitation, when present, declare those client capabilities
// and give the canned answer to server-initiated requests.
// Steps:
//   {"op": "listTools"}
//   {"op": "callTool", "name": N, "arguments": {...}, "progress": true,
//    "cancelAfterMs": MS, "timeoutMs": MS}
//   {"op": "request", "method": M, "params": {...}}   any JSON-RPC request
//   {"op": "ping"}   {"op": "sleep", "ms": MS}
//   {"op": "parallel", "steps": [...]}                  run concurrently
// Output: one JSON line per step, in order:
//   {"step": "0", "op": "...", "ok": true, "result": {...}, "text": "...", ...}
//   {"step": "1", "op": "...", "ok": false, "error": {"code": -32602, "message": "..."}}
// plus {"op": "serverRequest", "method": ...} lines when the server asks the
// client something. Exit 0 when every step ran (whatever its outcome), 1 when
// the connection or the script failed (with an {"op": "connect"|"script"} line).
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  ProgressNotificationSchema,
  ResultSchema,
} from "@modelcontextprotocol/sdk/types.js";

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

// process.exit does not wait for a piped stdout to drain; exit once the last
// write (and so every earlier one) has been flushed.
function exit(code) {
  process.stdout.write("", () => process.exit(code));
}

function parseArgs(argv) {
  const o = { url: null, token: null, script: "-", timeout: 60000, command: null, args: [],
    oauthIssuer: null, oauthClientId: null, oauthClientSecret: null, oauthCode: false };
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
    else if (a === "--oauth-issuer") o.oauthIssuer = next();
    else if (a === "--oauth-client-id") o.oauthClientId = next();
    else if (a === "--oauth-client-secret") o.oauthClientSecret = next();
    else if (a === "--oauth-code") o.oauthCode = true;
    else if (a === "--script") o.script = next();
    else if (a === "--timeout") o.timeout = Number(next());
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.url && !o.command) throw new Error("give --url URL or -- COMMAND ARGS...");
  if (o.url && o.command) throw new Error("give either --url or a command, not both");
  if (o.oauthIssuer && !o.oauthCode && !(o.oauthClientId && o.oauthClientSecret))
    throw new Error("--oauth-issuer needs --oauth-client-id and --oauth-client-secret, or --oauth-code");
  return o;
}

// An OAuth client provider for the authorization code grant whose
// "browser" follows the authorization URL itself: the authorization server
// (a test's stand-in) approves at once and redirects with the code.
class AutoApproveProvider {
  constructor() {
    this.redirect = "http://127.0.0.1:1/callback"; // never contacted: the code is read from the Location header
    this.code = null;
  }
  get redirectUrl() { return this.redirect; }
  get clientMetadata() {
    return { client_name: "planlock-test-agent", redirect_uris: [this.redirect], grant_types: ["authorization_code"],
      response_types: ["code"], token_endpoint_auth_method: "client_secret_basic" };
  }
  clientInformation() { return this.client; }
  saveClientInformation(info) { this.client = info; }
  tokens() { return this.saved; }
  saveTokens(tokens) { this.saved = tokens; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
  async redirectToAuthorization(url) {
    const res = await fetch(url, { redirect: "manual" });
    const loc = res.headers.get("location");
    if (!loc) throw new Error(`authorization endpoint answered ${res.status} without a redirect`);
    const back = new URL(loc);
    if (back.searchParams.get("error")) throw new Error(`authorization refused: ${back.searchParams.get("error")}`);
    this.code = back.searchParams.get("code");
  }
}

function errorOf(err) {
  // JSON-RPC errors carry a numeric code; transport failures and aborts do not.
  const e = { code: typeof err?.code === "number" ? err.code : null, message: String(err?.message ?? err) };
  if (err?.data !== undefined) e.data = err.data;
  if (err?.name) e.name = err.name;
  return e;
}

function textOf(result) {
  if (!Array.isArray(result?.content)) return "";
  return result.content.filter((c) => c.type === "text").map((c) => c.text).join("");
}

let logCount = 0;
const progressByToken = new Map();

async function runStep(client, step, id, defaultTimeout) {
  const base = { step: id, op: step.op };
  try {
    switch (step.op) {
      case "listTools": {
        const result = await client.listTools({}, { timeout: step.timeoutMs ?? defaultTimeout });
        return { ...base, ok: true, result, tools: result.tools.map((t) => t.name) };
      }
      case "callTool": {
        const opts = { timeout: step.timeoutMs ?? defaultTimeout };
        // Progress is collected by our own token rather than through the
        // SDK's onprogress: the SDK handles notifications a microtask later
        // than responses, so notifications that arrive in the same read as
        // the response would be dropped as "unknown token".
        const token = `agent-${id}`;
        const progress = [];
        if (step.progress) progressByToken.set(token, progress);
        let controller = null;
        let timer = null;
        if (step.cancelAfterMs !== undefined) {
          controller = new AbortController();
          opts.signal = controller.signal;
          timer = setTimeout(() => controller.abort(new Error("cancelled by the agent script")), step.cancelAfterMs);
        }
        const logBefore = logCount;
        try {
          const params = { name: step.name };
          if (step.arguments !== undefined) params.arguments = step.arguments;
          if (step.progress) params._meta = { progressToken: token };
          const result = await client.callTool(params, CallToolResultSchema, opts);
          await new Promise((r) => setImmediate(r)); // let queued notifications land
          const out = { ...base, name: step.name, ok: true, isError: result.isError === true, text: textOf(result), result };
          if (step.progress) out.progress = progress;
          out.logMessages = logCount - logBefore;
          return out;
        } catch (err) {
          const out = { ...base, name: step.name, ok: false, error: errorOf(err) };
          if (controller) out.cancelled = controller.signal.aborted;
          if (step.progress) out.progress = progress;
          out.logMessages = logCount - logBefore;
          return out;
        } finally {
          if (timer) clearTimeout(timer);
          progressByToken.delete(token);
        }
      }
      case "request": {
        const result = await client.request({ method: step.method, params: step.params ?? {} }, ResultSchema, {
          timeout: step.timeoutMs ?? defaultTimeout,
        });
        return { ...base, method: step.method, ok: true, result };
      }
      case "ping": {
        await client.ping();
        return { ...base, ok: true };
      }
      case "sleep": {
        await new Promise((r) => setTimeout(r, step.ms ?? 0));
        return { ...base, ok: true };
      }
      case "parallel": {
        const results = await Promise.all(
          (step.steps ?? []).map((s, j) => runStep(client, s, `${id}.${j}`, defaultTimeout)),
        );
        for (const r of results) emit(r);
        return { ...base, ok: true, count: results.length };
      }
      default:
        return { ...base, ok: false, error: { code: null, message: `unknown op ${JSON.stringify(step.op)}` } };
    }
  } catch (err) {
    return { ...base, ok: false, error: errorOf(err) };
  }
}

async function main() {
  let opts;
  let script;
  try {
    opts = parseArgs(process.argv.slice(2));
    const raw = readFileSync(opts.script === "-" ? 0 : opts.script, "utf8");
    script = JSON.parse(raw);
    if (Array.isArray(script)) script = { steps: script };
    if (!Array.isArray(script.steps)) throw new Error("script has no steps array");
  } catch (err) {
    emit({ op: "script", ok: false, error: errorOf(err) });
    return exit(1);
  }

  const capabilities = {};
  if (script.sampling) capabilities.sampling = {};
  if (script.elicitation) capabilities.elicitation = {};
  const client = new Client({ name: "planlock-test-agent", version: "1.0.0" }, { capabilities });
  client.setNotificationHandler(LoggingMessageNotificationSchema, () => {
    logCount++;
  });
  client.setNotificationHandler(ProgressNotificationSchema, (n) => {
    const { progressToken, ...rest } = n.params;
    progressByToken.get(progressToken)?.push(rest);
  });
  if (script.sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      emit({ op: "serverRequest", method: req.method, params: req.params });
      return { role: "assistant", content: { type: "text", text: script.sampling.text ?? "" }, model: "planlock-test-agent" };
    });
  }
  if (script.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      emit({ op: "serverRequest", method: req.method, params: req.params });
      return { action: script.elicitation.action ?? "accept", content: script.elicitation.content ?? {} };
    });
  }

  let transport;
  let authProvider;
  const newTransport = () => {
    if (!opts.url) {
      return new StdioClientTransport({ command: opts.command, args: opts.args, env: { ...process.env }, stderr: "inherit" });
    }
    const init = opts.token ? { headers: { Authorization: `Bearer ${opts.token}` } } : undefined;
    return new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: init, authProvider });
  };
  if (opts.oauthIssuer && opts.oauthCode) {
    authProvider = new AutoApproveProvider();
  } else if (opts.oauthIssuer) {
    authProvider = new ClientCredentialsProvider({ clientId: opts.oauthClientId, clientSecret: opts.oauthClientSecret,
      expectedIssuer: opts.oauthIssuer, clientName: "planlock-test-agent" });
  }
  transport = newTransport();
  try {
    try {
      await client.connect(transport, { timeout: script.connectTimeoutMs ?? opts.timeout });
    } catch (err) {
      // The authorization code flow stops at the redirect: finish it with
      // the code the authorization server gave, and connect again.
      if (!(err instanceof UnauthorizedError) || !authProvider?.code) throw err;
      await transport.finishAuth(authProvider.code);
      transport = newTransport();
      await client.connect(transport, { timeout: script.connectTimeoutMs ?? opts.timeout });
    }
  } catch (err) {
    emit({ op: "connect", ok: false, error: errorOf(err) });
    return exit(1);
  }
  const info = client.getServerVersion();
  emit({ op: "connect", ok: true, server: info ?? null, capabilities: client.getServerCapabilities() ?? null });

  for (let i = 0; i < script.steps.length; i++) {
    emit(await runStep(client, script.steps[i], String(i), opts.timeout));
  }
  // Closing may race a dead or stuck upstream; the results are already
  // printed, so give it a moment and leave.
  await Promise.race([client.close().catch(() => {}), new Promise((r) => setTimeout(r, 1000))]);
  exit(0);
}

main();
