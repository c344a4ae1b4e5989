#!/usr/bin/env bash
# The harness's own test suite: both environments, Chromium for the report's browser tests,
# then the tests in the main environment (the fast tier, then the full one) and the MXNet-specific ones in the MXNet
# environment.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null) \
        || echo "chromium could not be installed: the browser tests will be skipped"
fi
bash scripts/main-env.sh
bash scripts/mxnet-env.sh
# bytecode written once, before the hundreds of processes the tests start: where PYTHONDONTWRITEBYTECODE is set,
# each of them (every nested pytest run, zygote and executor) would compile the package anew, and each pytest run
# would rewrite the asserts of every installed pytest plugin (hypothesis, xdist, anyio: about 120 modules)
warm_bytecode() {
    PYTHONDONTWRITEBYTECODE= "$1" -m compileall -q harness reference_impls >/dev/null || true
    (cd "$(mktemp -d)" && PYTHONDONTWRITEBYTECODE= "$1" -m pytest -p no:cacheprovider --co -q >/dev/null 2>&1 || true)
}
warm_bytecode "$PWD/.venv/bin/python"
warm_bytecode "$PWD/.venv-mxnet/bin/python"
# the fast tier first (minutes; docs/testing.md), and nothing more when it fails; then the full tier, which holds
# the rest (the mutant catalogue, the nested pytest runs, the wheel venvs) and none of the fast tier's tests
tier() {   # a tier with no test in what "$@" selects (exit 5) is no failure
    local rc=0
    "$@" || rc=$?
    if [ "$rc" != 0 ] && [ "$rc" != 5 ]; then exit "$rc"; fi
}
tier .venv/bin/python -m pytest -p no:cacheprovider -n 2 tests -m "not full" "$@"
tier .venv/bin/python -m pytest -p no:cacheprovider -n 2 tests -m full "$@"
# the hostile layers again without a sandbox: every defence but the sandbox's own (test_sandbox.py,
# test_sandbox_tight.py) holds without one
PYTEST_ADDOPTS="--sandbox off" .venv/bin/python -m pytest -p no:cacheprovider -n 2 tests/hostile \
    --ignore tests/hostile/test_sandbox.py --ignore tests/hostile/test_sandbox_tight.py "$@"
# (tests/test_wheel.py runs the MXNet wheel venv from the main environment)
.venv-mxnet/bin/python -m pytest -p no:cacheprovider -n 2 tests --ignore tests/test_wheel.py \
    -k "mxnet or contract or report or gate" "$@"
