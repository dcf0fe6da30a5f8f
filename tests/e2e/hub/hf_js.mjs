#!/usr/bin/env node
// The reference client for `basal pull`: Hugging Face's own JavaScript Hub
// library (@huggingface/hub, pinned in tests/oracle/package.json) run against
// a Hub URL, usually tests/e2e/hub/fake_hub.py. It writes the huggingface_hub
// cache layout (models--O--N/{blobs,snapshots,refs}) that basal pull must
// also write, so the two caches can be compared file by file.
//
// Results go to stdout as one JSON object; the library's own chatter
// (console.debug "Downloading ...") is sent to stderr so stdout stays JSON.
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const USAGE = `usage: node tests/e2e/hub/hf_js.mjs CMD --hub URL --cache DIR [--repo owner/name]
                                [--revision REV] [--token T] [--path P]

Runs @huggingface/hub (tests/oracle/node_modules) against the Hub at URL,
caching into DIR with the huggingface_hub layout. Prints one JSON object.

commands:
  snapshot      snapshotDownload of --repo at --revision (default main):
                prints {"snapshot": "DIR/models--O--N/snapshots/COMMIT"}
  file          downloadFileToCacheDir of --path: prints {"pointer": path}
  scan          scanCacheDir(DIR): repos, revisions, files, refs (no --hub)

options:
  --hub URL       Hub endpoint, e.g. http://127.0.0.1:PORT (snapshot, file)
  --cache DIR     cache directory (all commands)
  --repo ID       model repository owner/name (snapshot, file)
  --revision REV  branch, tag or commit (default main)
  --token T       access token, sent as Authorization: Bearer (must start hf_)
  --path P        file path in the repository (file)
  -h, --help      print this help and exit

On failure: prints {"error": message, "status": HTTP status if known}, exit 1.
Bad command line: message on stderr, exit 2.`;

function usageError(msg) {
	process.stderr.write(`hf_js.mjs: ${msg}\n(see --help)\n`);
	process.exit(2);
}

function parseArgs(argv) {
	const opts = {};
	const names = { "--hub": "hub", "--cache": "cache", "--repo": "repo", "--revision": "revision", "--token": "token", "--path": "path" };
	let cmd;
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i];
		if (a === "-h" || a === "--help") {
			process.stdout.write(USAGE + "\n");
			process.exit(0);
		}
		const eq = a.indexOf("=");
		const key = a.startsWith("--") && eq > 0 ? a.slice(0, eq) : a;
		if (key in names) {
			let v;
			if (eq > 0 && a.startsWith("--")) v = a.slice(eq + 1);
			else if (i + 1 < argv.length) v = argv[++i];
			else usageError(`${a} needs a value`);
			opts[names[key]] = v;
		} else if (a.startsWith("-")) {
			usageError(`unknown option ${a}`);
		} else if (cmd === undefined) {
			cmd = a;
		} else {
			usageError(`unexpected argument ${a}`);
		}
	}
	if (!["snapshot", "file", "scan"].includes(cmd ?? "")) usageError(cmd ? `unknown command ${cmd}` : "missing command");
	const need = { snapshot: ["hub", "cache", "repo"], file: ["hub", "cache", "repo", "path"], scan: ["cache"] }[cmd];
	for (const k of need) if (!opts[k]) usageError(`${cmd} needs --${k}`);
	return { cmd, opts };
}

// Dates become ISO strings, Maps objects, Sets arrays, Errors their message.
function plain(v) {
	if (v instanceof Date) return v.toISOString();
	if (v instanceof Error) return v.message;
	if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [k, plain(x)]));
	if (v instanceof Set) return [...v].map(plain);
	if (Array.isArray(v)) return v.map(plain);
	if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
	return v;
}

async function main() {
	const { cmd, opts } = parseArgs(process.argv.slice(2));
	// loaded only now, so that --help and usage errors do no work
	const here = dirname(fileURLToPath(import.meta.url));
	const hub = await import(join(here, "..", "..", "oracle", "node_modules", "@huggingface", "hub", "dist", "index.mjs"));
	for (const k of ["log", "info", "debug"]) console[k] = (...a) => console.error(...a);

	const common = {
		repo: { type: "model", name: opts.repo },
		revision: opts.revision ?? "main",
		cacheDir: opts.cache,
		hubUrl: opts.hub?.replace(/\/+$/, ""),
		...(opts.token ? { accessToken: opts.token } : {}),
	};
	let out;
	if (cmd === "snapshot") {
		out = { snapshot: await hub.snapshotDownload(common) };
	} else if (cmd === "file") {
		out = { pointer: await hub.downloadFileToCacheDir({ ...common, path: opts.path }) };
	} else {
		const info = await hub.scanCacheDir(opts.cache);
		out = plain(info);
	}
	process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
	const out = { error: String(err?.message ?? err) };
	if (typeof err?.statusCode === "number") out.status = err.statusCode;
	if (err?.cause) out.cause = String(err.cause?.message ?? err.cause);
	process.stdout.write(JSON.stringify(out) + "\n");
	process.exit(1);
});
