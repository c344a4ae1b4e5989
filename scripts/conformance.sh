#!/usr/bin/env bash
# The main job: set up both environments and run the bundled conformance matrix (every bundled
# contract x every framework's reference implementation) in one pytest run: the judge runs in
# .venv, MXNet's executors in .venv-mxnet (MXNet 1.9.1 needs numpy<2). Writes reports/results.json,
# reports/conformance.html and the summary table. Extra arguments go to pytest (e.g. --contract rmsnorm).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/main-env.sh >/dev/null || exit 4
bash scripts/mxnet-env.sh >/dev/null || exit 4
mkdir -p reports
.venv/bin/python -m pytest -p no:cacheprovider -n 2 -q --executor-python mxnet=.venv-mxnet/bin/python \
    --conformance-json reports/results.json --conformance-html reports/conformance.html "$@"
status=$?
echo "results: reports/results.json  report: reports/conformance.html"
exit $status
