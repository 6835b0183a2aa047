// Postinstall: both pinned conformance suites import fs.globSync, which only
// exists from Node 22, so the whole CLI fails to load on Node 20. Swap that one
// name of the bundle's "fs" import for the glob package's globSync (same call
// shape: pattern, {cwd}) and leave everything else untouched. Idempotent;
// fails loudly if a bundle changed shape.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));
const bundles = [
  "node_modules/@modelcontextprotocol/conformance/dist/index.js",
  "node_modules/conformance-2026/dist/index.js",
];
// import{…,globSync as X,…}from"fs";
const fsImport = /import\{([^}]*)\}from"fs";/;

for (const rel of bundles) {
  const target = join(here, rel);
  const src = readFileSync(target, "utf8");
  if (src.includes('}from"glob";')) {
    continue;
  }
  const m = src.match(fsImport);
  const names = m ? m[1].split(",") : [];
  const glob = names.find((n) => /^globSync as \w+$/.test(n));
  if (!glob) {
    console.error(`patch-conformance: expected fs.globSync import not found in ${target}; update this patch for the pinned version`);
    process.exit(1);
  }
  // The replacement resolves "glob" from the conformance package; make sure it can.
  createRequire(target).resolve("glob");
  const rest = names.filter((n) => n !== glob).join(",");
  writeFileSync(target, src.replace(m[0], `import{${rest}}from"fs";import{${glob}}from"glob";`));
  console.error(`patch-conformance: ${rel}: replaced fs.globSync import with glob's globSync (Node 20)`);
}
