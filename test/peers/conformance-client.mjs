#!/usr/bin/env node
// planlock as the client of a conformance client scenario
// (conformance-2026 client --command "node conformance-client.mjs" ...).
// The suite runs this with the scenario server's URL as the last argument
// and the scenario's name (and context) in the environment. It starts
// `planlock proxy` with that server as its HTTP upstream and a plan that
// allows what the scenario offers, and drives through it, as an agent, the
// requests the scenario expects (the TypeScript SDK v2 client pinned to
// 2026-07-28, over stdio). What the scenario server sees is planlock's side.
//
//   PLANLOCK_BIN=/path/to/planlock node conformance-client.mjs SERVER_URL
//
// Exit status: 0 when the agent ran its steps (whatever their outcome: the
// scenario's checks judge them), 1 when it could not connect or run.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

// What each scenario offers, as a plan: its tools (with their arguments),
// resources and prompts. A scenario not named gets the fallback, which
// allows nothing the scenario serves; planlock still speaks to the server.
const step = (tool, args = []) =>
  `  step "${tool}" {\n    tool      = "${tool}"\n    max_calls = 10\n` +
  args.map((a) => `    arg "${a}" { any = true }\n`).join("") + `  }\n`;
const inputStep = (tool) =>
  `  step "${tool}" {\n    tool      = "${tool}"\n    max_calls = 10\n` +
  `    input {\n      elicitation {\n        field "confirmed" {\n          type     = "boolean"\n          optional = true\n        }\n      }\n    }\n  }\n`;
const plans = {
  tools_call: step("add_numbers", ["a", "b"]),
  "request-metadata": step("echo"),
  "http-standard-headers":
    step("test_headers") + step("my-hyphenated-tool") +
    `  resource "spaces" {\n    uri       = "file:///path/to/file%20name.txt"\n    max_reads = 10\n  }\n` +
    `  resource "query" {\n    uri       = "https://example.com/resource?id=123"\n    max_reads = 10\n  }\n` +
    `  prompt "test_prompt" {\n    max_calls = 10\n  }\n`,
  "json-schema-ref-no-deref": step("lookup_user", ["id", "profile"]),
  // Every tool it lists, the ones with invalid x-mcp-header annotations
  // too: the plan would let them through, so only planlock's own check
  // of the annotations keeps them from the upstream.
  "http-invalid-tool-headers":
    step("valid_tool", ["region"]) + step("invalid_empty_header", ["value"]) + step("invalid_object_header", ["data"]) +
    step("invalid_array_header", ["items"]) + step("invalid_null_header", ["nil"]) + step("invalid_number_header", ["score"]) +
    step("invalid_duplicate_same_case", ["field1", "field2"]) + step("invalid_duplicate_diff_case", ["field1", "field2"]) +
    step("invalid_space_in_name", ["value"]) + step("invalid_colon_in_name", ["value"]) +
    step("invalid_non_ascii_name", ["value"]) + step("invalid_control_char_name", ["value"]),
  "json-schema-2020-12-preservation": step("json_schema_2020_12_tool") + step("json_schema_echo", ["schema"]),
  // Its multi-round tools ask for a form with one boolean; the plan lets
  // that through (input blocks) and the agent accepts (elicitation below).
  "sep-2322-client-request-state":
    inputStep("test_mrtr_echo_state") + inputStep("test_mrtr_no_state") + step("test_mrtr_unrelated") + step("test_mrtr_no_result_type"),
};

// Arguments of the tools the scenario calls, when the context gives none.
// json_schema_echo takes back the schema of json_schema_2020_12_tool as the
// agent received it through planlock.
const callArgs = {
  add_numbers: () => ({ a: 5, b: 3 }),
  lookup_user: () => ({ id: "user-1" }),
  valid_tool: () => ({ region: "us-west1" }),
  json_schema_echo: (tools) => ({ schema: tools.find((t) => t.name === "json_schema_2020_12_tool")?.inputSchema ?? {} }),
};

function planFor(scenario, context) {
  let body = plans[scenario] ?? step("planlock_conformance_nothing");
  for (const c of context?.toolCalls ?? []) {
    if (!body.includes(`step "${c.name}"`)) body += step(c.name, Object.keys(c.arguments ?? {}));
  }
  return `plan "conformance-client" {\n  goal  = "drive the conformance scenario ${scenario} through planlock"\n  order = "any"\n${body}}\n`;
}

function emit(obj) {
  process.stderr.write(JSON.stringify(obj) + "\n");
}

const url = process.argv[process.argv.length - 1];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const context = process.env.MCP_CONFORMANCE_CONTEXT ? JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT) : {};
const bin = process.env.PLANLOCK_BIN;
if (!bin || !url?.startsWith("http")) {
  emit({ error: "usage: PLANLOCK_BIN=planlock node conformance-client.mjs SERVER_URL" });
  process.exit(1);
}
const dir = mkdtempSync(join(tmpdir(), "planlock-conformance-client-"));
const plan = join(dir, "plan.hcl");
writeFileSync(plan, planFor(scenario, context));

const client = new Client({ name: "planlock-conformance-agent", version: "1.0.0" },
  { versionNegotiation: { mode: { pin: "2026-07-28" } }, capabilities: { elicitation: { form: {} } } });
// The agent's user accepts every form with confirmed = true.
client.setRequestHandler("elicitation/create", async () => ({ action: "accept", content: { confirmed: true } }));
const transport = new StdioClientTransport({
  command: bin,
  args: ["proxy", "--plan", plan, "--insecure-skip-verify", "--state", join(dir, "state"), "--upstream-url", url],
  env: { ...process.env, HOME: dir },
  stderr: "inherit",
});

async function attempt(what, f) {
  try {
    const r = await f();
    emit({ step: what, ok: true, result: r });
    return r;
  } catch (err) {
    emit({ step: what, ok: false, error: String(err?.message ?? err) });
    return null;
  }
}

let code = 0;
try {
  await client.connect(transport, { timeout: 20000 });
  const caps = client.getServerCapabilities() ?? {};
  const tools = (await attempt("tools/list", () => client.listTools()))?.tools ?? [];
  const calls = context.toolCalls ?? tools.map((t) => ({ name: t.name, arguments: callArgs[t.name]?.(tools) ?? {} }));
  for (const c of calls) await attempt(`tools/call ${c.name}`, () => client.callTool(c));
  if (caps.resources) {
    const resources = (await attempt("resources/list", () => client.listResources()))?.resources ?? [];
    for (const r of resources) await attempt(`resources/read ${r.uri}`, () => client.readResource({ uri: r.uri }));
  }
  if (caps.prompts) {
    const prompts = (await attempt("prompts/list", () => client.listPrompts()))?.prompts ?? [];
    for (const p of prompts) await attempt(`prompts/get ${p.name}`, () => client.getPrompt({ name: p.name }));
  }
} catch (err) {
  emit({ step: "connect", ok: false, error: String(err?.message ?? err) });
  code = 1;
  // planlock proxy over stdio logs to its state directory: show why.
  process.stderr.write(readFileSync(plan, "utf8"));
  try { process.stderr.write(readFileSync(join(dir, "state", "proxy.log"), "utf8")); } catch {}
} finally {
  try { await client.close(); } catch {}
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);
