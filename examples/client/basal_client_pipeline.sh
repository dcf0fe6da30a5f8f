#!/usr/bin/env bash
# `basal client` pipelines over a JSONL file (README "Client and N replicas"):
#  1. route every ticket of tickets.jsonl (the state at /text) with one choice
#     question, four requests in flight, one envelope per line in input order;
#  2. only the chosen department of each ticket, next to its id (--value
#     answers one line per record; paste joins them with the ids);
#  3. whole requests built from the tickets (one System One request per line)
#     read from a pipe, with retries for a full server (529).
set -euo pipefail
usage() {
    cat <<'TXT'
Runs three `basal client` pipelines over examples/client/tickets.jsonl against a basal-c server.
usage: examples/client/basal_client_pipeline.sh
  -h, --help    this text
environment:
  BASAL         the basal binary (default: basal on PATH, else build/basal of this checkout)
  BASAL_URL     the server (default http://127.0.0.1:8000; `make run` serves the demo model there)
  BASAL_MODEL   the model (default: the server's only model)
Each pipeline's output goes to stdout after a "# ..." line naming it.
TXT
}
case ${1:-} in -h|--help) usage; exit 0 ;; '') ;; *) echo "basal_client_pipeline.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
basal=${BASAL:-$(command -v basal || echo "$here/../../build/basal")}
export BASAL_URL=${BASAL_URL:-http://127.0.0.1:8000}
tickets=$here/tickets.jsonl
route=(--ask 'Do którego działu skierować zgłoszenie?'
       --choice 'cards=Reklamacje kart' --choice 'online=Wsparcie bankowości elektronicznej' --choice 'loans=Kredyty')

echo "# 1. one envelope per ticket: {\"index\", \"ok\", \"input\", \"response\"}"
"$basal" client --state "$tickets" --input jsonl --state-pointer /text --jobs 4 --keep-going "${route[@]}"

echo "# 2. ticket id and department"
paste -d ' ' <(sed 's/.*"id": "\([^"]*\)".*/\1/' "$tickets") \
    <("$basal" client --state "$tickets" --input jsonl --state-pointer /text --value "${route[@]}")

echo "# 3. whole requests from a pipe (--request -), retried while the server is full"
while IFS= read -r line; do
    text=${line#*\"text\": \"}; text=${text%\"\}}
    printf '{"state": "%s", "questions": {"pilne": {"type": "noul", "instructions": "Czy sprawa jest pilna?"}}}\n' "$text"
done <"$tickets" | "$basal" client --request - --input jsonl --jobs 2 --retries 5
