#!/usr/bin/env bash
# GET /openapi.json (issue 18): web/openapi.json is what tools/make-openapi.py
# makes from TypeSafe's OpenAPI document; a valid OpenAPI 3.1 document for
# @readme/openapi-parser (npm oracle); TypeSafe's schemas kept; served byte
# for byte; real answers of every endpoint match it (tests/server/openapi_test.py).
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" "$SHARED/spec/typesafe-openapi.json" tests/oracle/node_modules/@readme/openapi-parser
if SHARED=$SHARED "$PY" tools/make-openapi.py --check; then ok; else bad "web/openapi.json is not tools/make-openapi.py's output"; fi
if out=$(node tools/validate-openapi.mjs web/openapi.json); then ok; else bad "web/openapi.json is not valid OpenAPI: $out"; fi
# the validator can fail: a response without its description, a dangling $ref
"$PY" - "$tmp" <<'PY'
import json, sys
d = json.load(open("web/openapi.json"))
del d["paths"]["/health"]["get"]["responses"]["200"]["description"]
json.dump(d, open(sys.argv[1] + "/no-description.json", "w"))
d = json.load(open("web/openapi.json"))
d["paths"]["/v1/basal"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"] += "X"
json.dump(d, open(sys.argv[1] + "/dangling-ref.json", "w"))
PY
for f in no-description dangling-ref; do
    if node tools/validate-openapi.mjs "$tmp/$f.json" >/dev/null; then bad "the validator accepted $f"; else ok; fi
done
echo "$pass passed, $fail failed (document)"
[ "$fail" -eq 0 ] || exit 1
run_servers_py 120 480 tests/server/openapi_test.py
