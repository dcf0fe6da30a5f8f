// The official TypeSafe JS SDK (@typesafe-ai/sdk 0.6.0, spec 07 §6) against
// `basal serve` on 127.0.0.1: models.list, choice / noul / score with typed
// answers, errors mapped to the SDK's classes, and overload (529) retried by
// the SDK. Env: URL_MAIN, URL_BUSY (--max-inflight 1), URL_AUTH (key KEY),
// MODEL, ORACLE_DIR (the npm folder holding the SDK).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const pkgDir = join(process.env.ORACLE_DIR, "node_modules", "@typesafe-ai", "sdk");
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
const sdk = await import(pathToFileURL(join(pkgDir, pkg.exports["."].import.default)).href);
const { TypeSafeClient, choice, noul, score, BadRequestError, UnprocessableEntityError, InternalServerError,
        AuthenticationError, APIError } = sdk;

let passed = 0, failed = 0;
const ok = (cond, what) => { if (cond) passed++; else { failed++; console.log("FAIL:", what); } };
const MODEL = process.env.MODEL;
const S = "Klient pisze: zapłaciłem dwa razy za to samo zamówienie, proszę o zwrot.";
const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);

// Every attempt the SDK makes goes through this fetch, so retries are visible.
function counting() {
  const log = [];
  const f = async (url, init) => {
    const t = Date.now();
    const r = await fetch(url, init);
    const call = /"state":"(\d+):/.exec(typeof init?.body === "string" ? init.body : "")?.[1];
    log.push({ url, status: r.status, t, end: Date.now(), call, retryAfter: r.headers.get("retry-after") });
    return r;
  };
  return { f, log };
}

async function rejects(promise, cls, status, what) {
  try {
    await promise;
    ok(false, `${what}: resolved, expected ${cls.name}`);
    return null;
  } catch (e) {
    ok(e instanceof cls, `${what}: ${e?.constructor?.name} (${e?.message}), expected ${cls.name}`);
    ok(e instanceof APIError && e.status === status, `${what}: status ${e?.status}, expected ${status}`);
    return e;
  }
}

async function main() {
  const c = new TypeSafeClient({ baseURL: process.env.URL_MAIN, apiKey: "placeholder", defaultModel: MODEL,
                                 timeout: 60000 });
  // models
  const { data: models, requestId } = await c.models.list().withResponse();
  ok(Array.isArray(models) && models.length === 1, `models.list: ${JSON.stringify(models)}`);
  ok(models[0]?.name === MODEL && models[0]?.release_date === "2026-10-05" &&
     models[0]?.description.startsWith("basal typed-decision model"), "models.list entry");
  ok(/^[0-9a-f]{32}$/.test(requestId ?? ""), `requestId ${requestId}`);

  // one call per question type, typed answers
  const r1 = await c.systemOne({ state: S, questions: {
    topic: choice("Czego dotyczy zgłoszenie?", { billing: null, shipping: "wysyłka", other: null }) } });
  const a1 = r1.answers.topic;
  ok(r1.model === MODEL, `choice: model ${r1.model}`);
  ok(a1.type === "choice" && ["billing", "shipping", "other"].includes(a1.choice), `choice answer ${JSON.stringify(a1)}`);
  ok(JSON.stringify(Object.keys(a1.probabilities)) === '["billing","shipping","other"]', "choice probability keys");
  ok(Math.abs(sum(a1.probabilities) - 1) <= 1e-9, `choice probabilities sum ${sum(a1.probabilities)}`);
  ok(a1.probabilities[a1.choice] === Math.max(...Object.values(a1.probabilities)), "choice is the argmax");
  ok(typeof a1.confidence === "number" && a1.confidence >= 0 && a1.confidence <= 1, "choice confidence");
  ok(Number.isInteger(r1.usage.input_tokens) && r1.usage.input_tokens > 0 && r1.usage.output_tokens === 0, "usage");

  // a choice with 40 options (spec 03 §5: two engine rounds) reads as a normal typed choice answer
  const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, i % 3 ? null : `opcja ${i}`]));
  const rl = await c.systemOne({ state: S, questions: { topic: choice("Której kategorii dotyczy zgłoszenie?", many) } });
  const al = rl.answers.topic;
  ok(al.type === "choice" && al.choice in many, `40-option choice answer ${JSON.stringify(al).slice(0, 200)}`);
  ok(JSON.stringify(Object.keys(al.probabilities)) === JSON.stringify(Object.keys(many)), "40-option keys in order");
  ok(Math.abs(sum(al.probabilities) - 1) <= 1e-9, `40-option probabilities sum ${sum(al.probabilities)}`);
  ok(al.probabilities[al.choice] === Math.max(...Object.values(al.probabilities)), "40-option choice is the argmax");

  const r2 = await c.systemOne({ state: { ticket: S, channel: "email" }, questions: {
    pay: noul("Czy chodzi o płatność?", { true: "tak", false: "nie" }) } });
  ok(r2.answers.pay.type === "noul" && r2.answers.pay.noul >= 0 && r2.answers.pay.noul <= 1,
     `noul answer ${JSON.stringify(r2.answers.pay)}`);
  ok(!("probabilities" in r2.answers.pay), "noul has no probabilities on /v1/systemone");

  const r3 = await c.systemOne({ state: S, questions: { urgency: score("Jak pilne?", ["niska", "średnia", "wysoka"]) } });
  const a3 = r3.answers.urgency;
  ok(a3.type === "score" && a3.score >= 0 && a3.score <= 2, `score answer ${JSON.stringify(a3)}`);
  ok(JSON.stringify(a3.legend) === '{"0":"niska","1":"średnia","2":"wysoka"}', "score legend");
  ok(Math.abs(sum(a3.probabilities) - 1) <= 1e-9, "score probabilities sum");
  const expect = Object.entries(a3.probabilities).reduce((s, [k, p]) => s + Number(k) * p, 0);
  ok(Math.abs(expect - a3.score) <= 1e-9, `score = expected level (${a3.score} vs ${expect})`);

  // the SDK's parse equals the raw body
  const body = { model: MODEL, state: S, questions: { topic: choice("Temat?", { a: null, b: null }) } };
  const raw = await (await fetch(`${process.env.URL_MAIN}/v1/systemone`, { method: "POST",
                                 body: JSON.stringify(body) })).json();
  const viaSdk = await c.systemOne(body);
  ok(JSON.stringify(raw.answers) === JSON.stringify(viaSdk.answers), "SDK answer equals the raw body's");

  // errors: classes by status, never retried
  const cnt = counting();
  const c2 = new TypeSafeClient({ baseURL: process.env.URL_MAIN, apiKey: "x", defaultModel: MODEL, fetch: cnt.f,
                                  timeout: 60000 });
  let e = await rejects(c2.systemOne({ state: S, questions: { q: choice("Temat?", {}) } }), BadRequestError, 400,
                        "empty choice");
  ok(e?.body?.detail === "Choice question must have at least one choice: q", `400 body ${JSON.stringify(e?.body)}`);
  e = await rejects(c2.systemOne({ state: S, questions: { q: { type: "noul", instructions: 5 } } }),
                    UnprocessableEntityError, 422, "noul instructions 5");
  ok(e?.body?.detail?.length === 3 && e.body.detail[0].type === "string_type", "422 detail list");
  ok(/^[0-9a-f]{32}$/.test(e?.requestId ?? ""), "error carries the request id");
  const c3 = new TypeSafeClient({ baseURL: process.env.URL_MAIN, apiKey: "x", fetch: cnt.f });
  e = await rejects(c3.systemOne({ state: S, questions: { q: noul("x") } }), BadRequestError, 400, "default model");
  ok(e?.body?.detail?.message === "Unknown model: jev-latest", "the SDK's default model jev-latest is not served");
  ok(cnt.log.length === 3, `400/422 not retried (${cnt.log.length} attempts for 3 calls)`);

  // authentication
  const bad = new TypeSafeClient({ baseURL: process.env.URL_AUTH, apiKey: "wrong", defaultModel: MODEL });
  await rejects(bad.systemOne({ state: S, questions: { q: noul("x") } }), AuthenticationError, 401, "wrong key");
  await rejects(bad.models.list(), AuthenticationError, 401, "wrong key on models");
  const good = new TypeSafeClient({ baseURL: process.env.URL_AUTH, apiKey: process.env.KEY, defaultModel: MODEL });
  ok((await good.models.list())[0]?.name === MODEL, "right key accepted");

  // overload: --max-inflight 1; the SDK retries 529 (honouring Retry-After: 1)
  const long = "Klient pisze: zapłaciłem dwa razy za to samo zamówienie. ".repeat(60);
  const ov = counting();
  const busy = new TypeSafeClient({ baseURL: process.env.URL_BUSY, apiKey: "x", defaultModel: MODEL, fetch: ov.f,
                                   timeout: 60000 });
  const calls = Array.from({ length: 8 }, (_, i) =>
    busy.systemOne({ state: `${i}: ${long}`, questions: { q: choice("Temat?", { a: null, b: null, c: null }) } })
      .then((r) => ({ ok: r }), (err) => ({ err })));
  const t0 = Date.now();
  const outs = await Promise.all(calls);
  const n529 = ov.log.filter((x) => x.status === 529).length;
  ok(n529 >= 1, `overload: the server answered 529 (${n529} of ${ov.log.length} attempts)`);
  ok(ov.log.filter((x) => x.status === 529).every((x) => x.retryAfter === "1"), "529 carries Retry-After: 1");
  ok(ov.log.length > 8, `overload: the SDK retried (${ov.log.length} attempts for 8 calls)`);
  for (const [i, o] of outs.entries()) {
    if (o.ok) ok(o.ok.answers.q.type === "choice" && Math.abs(sum(o.ok.answers.q.probabilities) - 1) <= 1e-9,
                 `overload call ${i} answered`);
    else ok(o.err instanceof InternalServerError && o.err.status === 529, `overload call ${i}: ${o.err}`);
  }
  ok(outs.some((o) => o.ok), "overload: some calls succeeded");
  // a retry after a 529 waits the Retry-After second, not the 0.5 s backoff
  let gaps = 0;
  for (let i = 0; i < 8; i++) {
    const mine = ov.log.filter((x) => x.call === String(i));
    for (let k = 1; k < mine.length; k++) {
      if (mine[k - 1].status !== 529) continue;
      gaps++;
      ok(mine[k].t - mine[k - 1].end >= 990, `call ${i}: retry ${mine[k].t - mine[k - 1].end} ms after a 529`);
    }
  }
  ok(gaps >= 1, `a retry after a 529 was observed (${gaps})`);
  ok(Date.now() - t0 < 60000, "overload phase bounded");
}

try {
  await main();
} catch (e) {
  failed++;
  console.log("FAIL: exception", e);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
