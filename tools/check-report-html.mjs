// Opens a `basal benchmark` HTML report in headless Debian chromium (driven
// by puppeteer-core from tests/oracle) and prints what a reader would see, as
// JSON on stdout: console messages and page errors, every network request the
// page tried (a self-contained report makes none besides itself), the charts
// with their points and bars as rendered (visible, inside the SVG's box), and
// the phase table rows. A screenshot of the whole page goes to argv[3].
// Usage: node tools/check-report-html.mjs REPORT.html SHOT.png
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

if (process.argv.slice(2).some((a) => a === "-h" || a === "--help")) {
    // before the npm packages are required: the help needs none of them
    process.stdout.write(`Opens a \`basal benchmark\` HTML report in headless chromium and prints what a reader sees as JSON.
usage: node tools/check-report-html.mjs REPORT.html SHOT.png
  REPORT.html  the report (no default)
  SHOT.png     where the whole-page screenshot goes (no default)
  -h, --help   this text
environment:
  CHROMIUM     the browser (default: /usr/bin/chromium)
`);
    process.exit(0);
}
const oracle = join(dirname(fileURLToPath(import.meta.url)), "..", "tests", "oracle");
const require = createRequire(join(oracle, "package.json"));
const puppeteer = require("puppeteer-core");

const [page_path, shot] = process.argv.slice(2);
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
            return a.width >= 0 && a.left >= b.left - 1 && a.right <= b.right + 1 && a.top >= b.top - 1 && a.bottom <= b.bottom + 1;
        };
        const charts = {};
        for (const svg of document.querySelectorAll("svg.chart")) {
            const r = svg.getBoundingClientRect();
            const points = {};
            for (const c of svg.querySelectorAll("circle.pt")) {
                const s = c.getAttribute("data-series");
                (points[s] ||= []).push({ x: +c.getAttribute("data-x"), y: +c.getAttribute("data-y"),
                                          visible: c.getBoundingClientRect().width > 0 && inside(c, svg) });
            }
            const bars = [...svg.querySelectorAll("rect.bar")].map((b) => ({
                bin: b.getAttribute("data-bin"), count: +b.getAttribute("data-count"), inside: inside(b, svg) }));
            charts[svg.id] = { width: r.width, height: r.height, title: svg.querySelector("title").textContent, points, bars };
        }
        const rows = [...document.querySelectorAll("tr.phase")].map((tr) => [...tr.cells].map((c) => c.textContent));
        return { title: document.title, charts, rows, text_length: document.body.innerText.length };
    }));
    await page.screenshot({ path: shot, fullPage: true });
} finally {
    await browser.close();
}
console.log(JSON.stringify(out));
