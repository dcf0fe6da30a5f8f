// Validates Kubernetes manifests (YAML, one or more documents per file)
// against the Kubernetes OpenAPI schemas bundled in the npm package
// kubernetes-models (tests/oracle/package.json: types, required fields,
// enums, formats; the package does not reject unknown fields, which
// tests/e2e/t_deploy.sh covers for the fields that matter). Usage: node tools/k8s-validate.mjs FILE...
// Prints one line per object; exit 1 if any object is invalid.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

if (process.argv.slice(2).some((a) => a === "-h" || a === "--help")) {
    // before the npm packages are required: the help needs none of them
    process.stdout.write(`Validates Kubernetes manifests against the schemas of the npm package kubernetes-models.
usage: node tools/k8s-validate.mjs FILE...
  FILE        YAML manifests, one or more documents each (no default)
  -h, --help  this text
Prints one line per object; exit 1 if any is invalid. It reads no environment variables.
`);
    process.exit(0);
}
const oracle = join(dirname(fileURLToPath(import.meta.url)), "..", "tests", "oracle");
const require = createRequire(join(oracle, "package.json"));
const YAML = require("yaml");
const modelsDir = dirname(require.resolve("kubernetes-models/package.json"));

// The schema of a kind, e.g. apps/v1 Deployment -> kubernetes-models/apps/v1/Deployment.js
async function modelClass(apiVersion, kind) {
    const path = join(modelsDir, ...apiVersion.split("/"), `${kind}.js`);
    const mod = await import(path);
    return mod[kind] || mod.default;
}

let bad = 0;
for (const file of process.argv.slice(2)) {
    const docs = YAML.parseAllDocuments(readFileSync(file, "utf8"));
    for (const doc of docs) {
        if (doc.errors.length) { console.log(`${file}: YAML: ${doc.errors[0].message}`); bad++; continue; }
        const obj = doc.toJS();
        if (obj === null) continue;
        const name = `${file}: ${obj.kind}/${obj.metadata && obj.metadata.name}`;
        let Cls;
        try { Cls = await modelClass(obj.apiVersion, obj.kind); } catch (e) {
            console.log(`${name}: no schema for ${obj.apiVersion} ${obj.kind}`); bad++; continue;
        }
        try {
            new Cls(obj).validate();
        } catch (e) {
            console.log(`${name}: INVALID: ${e.message.split("\n").slice(0, 4).join(" | ")}`); bad++; continue;
        }
        console.log(`${name}: valid`);
    }
}
process.exit(bad ? 1 : 0);
