// Postinstall: @modelcontextprotocol/conformance imports fs.globSync, which only
// exists from Node 22, so the whole CLI fails to load on Node 20. Swap that one
// import for the glob package's globSync (same call shape: pattern, {cwd}) and
// leave everything else untouched. Idempotent; fails loudly if the bundle changed.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));
const target = join(here, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const from = 'import{existsSync as a,globSync as o,mkdtempSync as s,promises as c,readFileSync as l}from"fs";';
const to = 'import{existsSync as a,mkdtempSync as s,promises as c,readFileSync as l}from"fs";import{globSync as o}from"glob";';

const src = readFileSync(target, "utf8");
if (src.includes(to)) {
  process.exit(0);
}
if (!src.includes(from)) {
  console.error(`patch-conformance: expected fs.globSync import not found in ${target}; update this patch for the pinned version`);
  process.exit(1);
}
// The replacement resolves "glob" from the conformance package; make sure it can.
createRequire(target).resolve("glob");
writeFileSync(target, src.replace(from, to));
console.error("patch-conformance: replaced fs.globSync import with glob's globSync (Node 20)");
