#!/usr/bin/env bash
# The harness's own test suite: both environments, Chromium for the report's browser tests,
# then the tests in the main environment and the MXNet-specific ones in the MXNet environment.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null) \
        || echo "chromium could not be installed: the browser tests will be skipped"
fi
bash scripts/main-env.sh
bash scripts/mxnet-env.sh
.venv/bin/python -m pytest -p no:cacheprovider -n 2 tests "$@"
# the hostile layers again without a sandbox: every defence but the sandbox's own (test_sandbox.py) holds without one
PYTEST_ADDOPTS="--sandbox off" .venv/bin/python -m pytest -p no:cacheprovider -n 2 tests/hostile \
    --ignore tests/hostile/test_sandbox.py "$@"
# (tests/test_wheel.py runs the MXNet wheel venv from the main environment)
.venv-mxnet/bin/python -m pytest -p no:cacheprovider -n 2 tests --ignore tests/test_wheel.py \
    -k "mxnet or contract or report or gate" "$@"
