#!/usr/bin/env node
// basal-c with the official TypeSafe SDK (@typesafe-ai/sdk, Node 20+): the SDK
// works unchanged once its baseURL points at the server. Asks one support
// ticket a choice, a yes/no (noul) and a score question with the SDK's typed
// helpers, lists the models, and prints the answers (--json: the answer
// objects as one JSON line). Overload (529) is retried by the SDK itself.
const usage = `Asks a basal-c server three typed questions through the official TypeSafe SDK and prints the answers.
usage: node examples/client/node/sdk_client.mjs [--json]
  --json        print {"model", "models", "answers", "usage"} as one JSON line (default: a summary)
  -h, --help    this text
environment:
  BASAL_URL      the server (default http://127.0.0.1:8000; \`make run\` serves the demo model there)
  BASAL_MODEL    the model (default basal-tiny, the demo model)
  BASAL_API_KEY  the Bearer key when the server has one (default: none; the SDK needs a value, any will do)
Install the SDK first: cd examples/client/node && npm install`;
const args = process.argv.slice(2);
if (args.includes("-h") || args.includes("--help")) { console.log(usage); process.exit(0); }
const unknown = args.filter((a) => a !== "--json");
if (unknown.length) { console.error(`sdk_client: unknown argument '${unknown[0]}'\n${usage}`); process.exit(2); }
// imported here, after the arguments, so that --help works before `npm install`
const { TypeSafeClient, choice, noul, score, APIError } = await import("@typesafe-ai/sdk");

const client = new TypeSafeClient({
  baseURL: process.env.BASAL_URL ?? "http://127.0.0.1:8000",
  apiKey: process.env.BASAL_API_KEY || "none",
  defaultModel: process.env.BASAL_MODEL ?? "basal-tiny",
  timeout: 120000,
});

try {
  const models = await client.models.list();
  const r = await client.systemOne({
    state: "Klient: od wczoraj nie mogę zalogować się do bankowości internetowej, a jutro muszę zapłacić czynsz.",
    questions: {
      dzial: choice("Do którego działu skierować zgłoszenie?", {
        cards: "Reklamacje kart", online: "Wsparcie bankowości elektronicznej", loans: "Kredyty" }),
      pilne: noul("Czy sprawa jest pilna?"),
      frustracja: score("Jak bardzo klient jest sfrustrowany?", ["wcale", "trochę", "bardzo"]),
    },
  });
  const { dzial, pilne, frustracja } = r.answers;   // typed: .choice, .noul, .score
  if (args.includes("--json")) {
    console.log(JSON.stringify({ model: r.model, models: models.map((m) => m.name), answers: r.answers, usage: r.usage }));
  } else {
    console.log(`models: ${models.map((m) => m.name).join(", ")}`);
    console.log(`department: ${dzial.choice} (p = ${dzial.probabilities[dzial.choice].toFixed(3)})`);
    console.log(`urgent: ${pilne.noul >= 0.5 ? "yes" : "no"} (p(yes) = ${pilne.noul.toFixed(3)})`);
    console.log(`frustration: ${frustracja.score.toFixed(2)} of 0..2`);
  }
} catch (e) {
  // APIError carries the HTTP status and the server's error body
  console.error(e instanceof APIError ? `sdk_client: HTTP ${e.status}: ${e.message}` : `sdk_client: ${e.message}`);
  process.exit(1);
}
