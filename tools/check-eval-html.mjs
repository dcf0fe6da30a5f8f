// Opens a `basal eval` HTML report in headless Debian chromium (driven by
// puppeteer-core from tests/oracle) and prints what a reader would see, as
// JSON on stdout: console messages and page errors, every request the page
// tried besides itself (a self-contained report makes none), each chart
// (reliability diagram, confidence histogram) with its bars and points as
// rendered (size, inside the SVG's box), the metric table's cells as shown
// and every confusion matrix's cells. A screenshot of the page goes to argv[3].
// Usage: node tools/check-eval-html.mjs REPORT.html SHOT.png
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

if (process.argv.slice(2).some((a) => a === "-h" || a === "--help")) {
    // before the npm packages are required: the help needs none of them
    process.stdout.write(`Opens a \`basal eval\` HTML report in headless chromium and prints what a reader sees as JSON.
usage: node tools/check-eval-html.mjs REPORT.html SHOT.png
  REPORT.html  the report (no default)
  SHOT.png     where the whole-page screenshot goes (no default)
  -h, --help   this text
environment:
  CHROMIUM     the browser (default: /usr/bin/chromium)
`);
    process.exit(0);
}
const args = process.argv.slice(2);
if (args.length !== 2) {
    process.stderr.write("check-eval-html: give REPORT.html and SHOT.png (see --help)\n");
    process.exit(2);
}
const oracle = join(dirname(fileURLToPath(import.meta.url)), "..", "tests", "oracle");
const require = createRequire(join(oracle, "package.json"));
const puppeteer = require("puppeteer-core");

const [page_path, shot] = args;
const url = pathToFileURL(resolve(page_path)).href;
const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
});
const out = { console: [], errors: [], requests: [] };
try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    page.on("console", (m) => out.console.push(`${m.type()}: ${m.text()}`));
    page.on("pageerror", (e) => out.errors.push(String(e)));
    page.on("requestfailed", (r) => out.errors.push(`request failed: ${r.url()}`));
    page.on("request", (r) => { if (r.url() !== url) out.requests.push(r.url()); });
    await page.goto(url, { waitUntil: "load", timeout: 30000 });
    Object.assign(out, await page.evaluate(() => {
        const inside = (el, svg) => {
            const a = el.getBoundingClientRect(), b = svg.getBoundingClientRect();
            return a.left >= b.left - 1 && a.right <= b.right + 1 && a.top >= b.top - 1 && a.bottom <= b.bottom + 1;
        };
        const charts = [...document.querySelectorAll("svg.chart")].map((svg) => {
            const r = svg.getBoundingClientRect();
            return {
                id: svg.id, kind: svg.classList.contains("reliability") ? "reliability" : "histogram",
                setting: +svg.dataset.setting, width: r.width, height: r.height,
                title: svg.querySelector("title").textContent,
                bars: [...svg.querySelectorAll("rect.bar")].map((b) => ({
                    bin: +b.dataset.bin, count: +b.dataset.count, accuracy: b.dataset.accuracy ?? null,
                    height: b.getBoundingClientRect().height, inside: inside(b, svg) })),
                points: [...svg.querySelectorAll("circle.pt")].map((c) => ({
                    bin: +c.dataset.bin, count: +c.dataset.count, x: +c.dataset.x, y: +c.dataset.y,
                    cx: +c.getAttribute("cx"), cy: +c.getAttribute("cy"),
                    visible: c.getBoundingClientRect().width > 0 && inside(c, svg) })),
            };
        });
        const metrics = [...document.querySelectorAll("tr.metric-row")].map((tr) => {
            const cells = {};
            for (const td of tr.querySelectorAll("td[data-metric]")) cells[td.dataset.metric] = td.textContent;
            return { setting: +tr.dataset.setting, scope: tr.dataset.scope, label: tr.cells[0].textContent, cells };
        });
        const confusion = [...document.querySelectorAll("table.confusion")].map((t) => {
            const rows = [...t.rows].slice(1);
            return { setting: +t.dataset.setting, group: +t.dataset.group, question: t.dataset.question,
                     label: t.dataset.label, classes: [...t.rows[0].cells].slice(1).map((c) => c.textContent),
                     cells: rows.map((tr) => [...tr.querySelectorAll("td.cell")].map((c) => +c.textContent)) };
        });
        return { title: document.title, charts, metrics, confusion, text_length: document.body.innerText.length,
                 scripts: document.querySelectorAll("script").length,
                 external: [...document.querySelectorAll("[src],link[href]")].map((e) => e.getAttribute("src") || e.getAttribute("href")) };
    }));
    await page.screenshot({ path: shot, fullPage: true });
} finally {
    await browser.close();
}
console.log(JSON.stringify(out));
