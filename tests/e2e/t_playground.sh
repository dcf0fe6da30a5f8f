#!/usr/bin/env bash
# The playground page (GET /, issue 18) in headless Debian chromium driven by
# puppeteer-core: no console errors, no foreign requests, labelled controls,
# a filled-in form gets the same answers as the same request sent directly and
# as the curl command it shows; --no-ui / YAML ui: false. The screenshot is
# left in $BUILD/playground.png. Checks in tests/server/playground_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" /usr/bin/chromium /usr/bin/curl tests/oracle/node_modules/puppeteer-core
run_servers_py 180 600 tests/server/playground_test.py
