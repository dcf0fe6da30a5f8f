#!/usr/bin/env bash
# POST /v1/lens (issue 33, the playground's logit lens) and its view in the
# playground page, in headless Debian chromium driven by puppeteer-core: the
# route against `basal lens` and /v1/systemone, its errors, --no-ui, the API
# key and the decision log; the page's charts (layers x options points, one
# line per option, per question and order) and prompt parts against the
# document, with no console error. The screenshot is left in
# $BUILD/playground-lens.png. Checks in tests/server/lens_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" /usr/bin/chromium tests/oracle/node_modules/puppeteer-core
run_servers_py 240 900 tests/server/lens_test.py
