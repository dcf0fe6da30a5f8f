// Validates an OpenAPI document with @readme/openapi-parser (tests/oracle):
// the OpenAPI 3.x JSON Schema of the document's own version, every $ref
// resolved, unique operationIds, path parameters. Prints {"valid": bool,
// "errors": [...], "warnings": [...]} as JSON; exit status 0 only if valid.
// Usage: node tools/validate-openapi.mjs openapi.json
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

if (process.argv.slice(2).some((a) => a === "-h" || a === "--help")) {
    // before the npm packages are required: the help needs none of them
    process.stdout.write(`Validates an OpenAPI document with @readme/openapi-parser; prints {"valid", "errors", "warnings"} as JSON.
usage: node tools/validate-openapi.mjs openapi.json
  openapi.json  the document (no default)
  -h, --help    this text
Exit status 0 only if valid. It reads no environment variables.
`);
    process.exit(0);
}
const oracle = join(dirname(fileURLToPath(import.meta.url)), "..", "tests", "oracle");
const require = createRequire(join(oracle, "package.json"));
const { validate } = require("@readme/openapi-parser");

const r = await validate(process.argv[2]);
console.log(JSON.stringify({ valid: r.valid, specification: r.specification,
                             errors: (r.errors || []).map((e) => e.message), warnings: r.warnings || [] }));
process.exit(r.valid ? 0 : 1);
