// Drives the playground page of `basal serve` (GET /) in headless Debian
// chromium (puppeteer-core from tests/oracle) the way a user would: waits for
// the model list, removes the example questions, adds the planned ones with
// the "Add question" button, types the state, instructions and options, picks
// the model, presses Send and waits for the answer. Prints what the page
// shows, as JSON on stdout: console messages, page errors, failed requests,
// requests to any other origin, the model list, each answer card (the answer
// object it stores in data-answer and its bars: key, data-p and the drawn
// width), the timing list, the curl command and the raw response text. A
// screenshot of the whole page goes to SHOT.
// Usage: node tools/check-playground.mjs BASE_URL SHOT.png PLAN_JSON
// PLAN_JSON: {"model": m, "state": s, "questions": [{"id", "type": "choice",
//   "instructions", "options": [[key, desc], ...]} | {"id", "type": "noul",
//   "instructions", "true", "false"} | {"id", "type", "example": true}]}
//   (example: the question as the page fills it in, only its id typed);
//   "lens": true also presses "Logit lens" after the answer and adds "lens": what the lens view shows
//   (its status, the raw response, and per chart its question, readout, order, data-layers/-options,
//   every point (layer, option, data-p, position inside the plot), the legend and the prompt parts)
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

if (process.argv.slice(2).some((a) => a === "-h" || a === "--help")) {
    // before the npm packages are required: the help needs none of them
    process.stdout.write(`Drives the playground page of \`basal serve\` in headless chromium and prints what it shows as JSON.
usage: node tools/check-playground.mjs BASE_URL SHOT.png PLAN_JSON
  BASE_URL    the server, e.g. http://127.0.0.1:8000/ (no default)
  SHOT.png    where the whole-page screenshot goes (no default)
  PLAN_JSON   the questions to add, as JSON text (see the comment at the top of this file; no default)
  -h, --help  this text
environment:
  CHROMIUM    the browser (default: /usr/bin/chromium)
`);
    process.exit(0);
}
const oracle = join(dirname(fileURLToPath(import.meta.url)), "..", "tests", "oracle");
const require = createRequire(join(oracle, "package.json"));
const puppeteer = require("puppeteer-core");

const [base, shot, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const origin = new URL(base).origin;
const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
});
const out = { console: [], errors: [], foreign: [], requests: [] };
try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1360, height: 900 });
    page.on("console", (m) => out.console.push(`${m.type()}: ${m.text()}`));
    page.on("pageerror", (e) => out.errors.push(String(e)));
    page.on("requestfailed", (r) => out.errors.push(`request failed: ${r.url()}`));
    page.on("request", (r) => {
        const u = new URL(r.url());
        if (u.origin !== origin) out.foreign.push(r.url());
        else out.requests.push(`${r.method()} ${u.pathname}`);
    });
    const resp = await page.goto(base, { waitUntil: "load", timeout: 30000 });
    out.page_status = resp.status();
    out.page_headers = resp.headers();
    await page.waitForFunction(() => document.querySelectorAll("#model option").length > 0, { timeout: 20000 });
    out.models = await page.$$eval("#model option", (os) => os.map((o) => o.value));

    // a clean form: remove the example questions
    while (await page.$("#questions fieldset.question button[name=remove]"))
        await page.click("#questions fieldset.question button[name=remove]");

    const retype = async (handle, text) => {
        await handle.evaluate((e) => { e.value = ""; });
        await handle.type(text);
    };
    await retype(await page.$("#state"), plan.state);
    await page.select("#model", plan.model);
    for (const q of plan.questions) {
        await page.select("#new-type", q.type);
        await page.click("#add-question");
        const cards = await page.$$("#questions fieldset.question");
        const card = cards[cards.length - 1];
        await retype(await card.$("[name=qid]"), q.id);
        if (q.example) continue;
        await retype(await card.$("[name=instructions]"), q.instructions);
        if (q.type === "choice") {
            while (await card.$(".opt button")) await (await card.$(".opt button")).click();
            for (const [k, d] of q.options) {
                await (await card.$("button[name=add-option]")).click();
                const rows = await card.$$(".opt");
                const row = rows[rows.length - 1];
                await (await row.$("[name=key]")).type(k);
                if (d) await (await row.$("[name=desc]")).type(d);
            }
        } else if (q.type === "noul") {
            if (q.true) await retype(await card.$("[name=true-desc]"), q.true);
            if (q.false) await retype(await card.$("[name=false-desc]"), q.false);
        } else {
            throw new Error(`plan: unsupported question type ${q.type}`);
        }
    }
    out.curl = await page.$eval("#curl", (e) => e.textContent);
    out.form_error = await page.$eval("#form-error", (e) => e.textContent);
    await page.click("#send");
    await page.waitForFunction(() => document.body.dataset.done === "1", { timeout: 60000 });
    Object.assign(out, await page.evaluate(() => {
        const answers = [...document.querySelectorAll("#result article.answer")].map((a) => ({
            qid: a.dataset.qid,
            answer: JSON.parse(a.dataset.answer),
            headline: a.querySelector(".headline").textContent,
            bars: [...a.querySelectorAll(".prob")].map((row) => {
                const track = row.querySelector(".track").getBoundingClientRect();
                const fill = row.querySelector(".fill").getBoundingClientRect();
                return { key: row.dataset.key, p: JSON.parse(row.dataset.p), shown: row.querySelector(".val").textContent,
                         width: track.width > 0 ? fill.width / track.width : -1, visible: fill.height > 0 };
            }),
        }));
        const timings = {};
        for (const dd of document.querySelectorAll("#timings dd")) timings[dd.dataset.name] = dd.textContent;
        return {
            http_status: document.querySelector("#http-status").dataset.status,
            response: document.querySelector("#result").dataset.response,
            answers, timings, title: document.title,
            unlabelled: [...document.querySelectorAll("input, select, textarea")].filter((e) =>
                !e.hidden && !e.labels?.length && !e.getAttribute("aria-label")).map((e) => e.outerHTML),
        };
    }));
    if (plan.lens) {
        await page.click("#lens");
        await page.waitForFunction(() => document.body.dataset.lensDone === "1", { timeout: 60000 });
        out.lens = await page.evaluate(() => {
            const res = document.querySelector("#lens-result");
            const charts = [...res.querySelectorAll("figure.lens-chart")].map((f) => {
                const svg = f.querySelector("svg"), box = svg.getBoundingClientRect();
                return {
                    qid: f.closest("article.lens-q").dataset.qid,
                    readout: Number(f.closest(".lens-grid").dataset.readout),
                    order: f.dataset.order, layers: Number(f.dataset.layers), options: Number(f.dataset.options),
                    caption: f.querySelector("figcaption").textContent,
                    visible: box.width > 0 && box.height > 0,
                    points: [...svg.querySelectorAll("circle.pt")].map((c) => {
                        const b = c.getBoundingClientRect();
                        return { layer: Number(c.dataset.layer), option: c.dataset.option, p: JSON.parse(c.dataset.p),
                                 inside: b.left >= box.left - 1 && b.right <= box.right + 1 && b.top >= box.top - 1 &&
                                         b.bottom <= box.bottom + 1 };
                    }),
                    lines: svg.querySelectorAll("path[data-option]").length,
                    legend: [...f.querySelectorAll(".legend > span")].map((e) => e.textContent),
                    parts: [...f.querySelectorAll("pre.prompt span")].map((e) => ({ part: e.dataset.part,
                        tokens: Number(e.dataset.tokens), text: e.textContent })),
                    counts: [...f.querySelectorAll("summary .partkey")].map((e) => [e.dataset.part, Number(e.dataset.tokens)]),
                };
            });
            return { status: document.querySelector("#lens-status")?.dataset.status, response: res.dataset.response,
                     error: document.querySelector("#lens-error")?.textContent ?? null, charts };
        });
    }
    await page.screenshot({ path: shot, fullPage: true });
} finally {
    await browser.close();
}
console.log(JSON.stringify(out));
