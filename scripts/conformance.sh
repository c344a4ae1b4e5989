#!/usr/bin/env bash
# The main job: set up both environments, run the bundled conformance matrix in each
# (every bundled contract x every framework's reference implementation), merge the results
# and write reports/results.json, reports/conformance.html and the summary table.
# Extra arguments go to both pytest runs (e.g. --contract rmsnorm, --check values).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/main-env.sh >/dev/null || exit 4
bash scripts/mxnet-env.sh >/dev/null || exit 4
mkdir -p reports
.venv/bin/python -m pytest -p no:cacheprovider -n 2 -q --framework torch --framework tensorflow --framework jax \
    --conformance-json reports/main.json "$@"
main=$?
.venv-mxnet/bin/python -m pytest -p no:cacheprovider -n 2 -q --framework mxnet \
    --conformance-json reports/mxnet.json "$@"
mx=$?
.venv/bin/python -m harness merge reports/main.json reports/mxnet.json -o reports/results.json || exit 4
.venv/bin/python -m harness report reports/results.json -o reports/conformance.html || exit 4
.venv/bin/python -m harness summary reports/results.json
echo "results: reports/results.json  report: reports/conformance.html"
# pytest's codes: 0 conformant, 1 failures; the worse of the two environments
[ $main -gt $mx ] && exit $main || exit $mx
