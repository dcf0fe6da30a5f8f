#!/usr/bin/env bash
# POST /v1/systemone with curl: request.json (a choice, a yes/no and a score
# question about one support ticket), then the same three questions on
# /v1/basal, the upstream dialect; then GET /v1/models. Each answer body is
# printed on one line of stdout.
set -euo pipefail
usage() {
    cat <<'TXT'
Sends examples/client/request.json to a basal-c server with curl and prints each JSON answer on one line.
usage: examples/client/curl.sh
  -h, --help    this text
environment:
  BASAL_URL      the server (default http://127.0.0.1:8000; `make run` serves the demo model there)
  BASAL_MODEL    the model name put in the request (default basal-tiny, the demo model)
  BASAL_API_KEY  sent as "Authorization: Bearer KEY" when set (serve --api-key-env)
TXT
}
case ${1:-} in -h|--help) usage; exit 0 ;; '') ;; *) echo "curl.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;; esac
url=${BASAL_URL:-http://127.0.0.1:8000}
model=${BASAL_MODEL:-basal-tiny}
here=$(dirname "$0")
auth=()
[ -z "${BASAL_API_KEY:-}" ] || auth=(-H "authorization: Bearer $BASAL_API_KEY")
# the request with the model of BASAL_MODEL (the file names the demo's)
body=$(sed "s/\"model\": \"basal-tiny\"/\"model\": \"$model\"/" "$here/request.json")
# --fail-with-body: an error status (400, 422, 529 ...) ends the script with its JSON body shown
for endpoint in /v1/systemone /v1/basal; do
    curl -sS --fail-with-body "${auth[@]}" -H 'content-type: application/json' --data-binary "$body" "$url$endpoint"
    echo
done
curl -sS --fail-with-body "${auth[@]}" "$url/v1/models"
echo
