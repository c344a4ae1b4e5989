#!/usr/bin/env bash
# Creates .venv-mxnet: MXNet 1.9.1 on numpy<2 with the harness installed editable.
# MXNet cannot share the main environment (numpy 2). Idempotent: when the environment
# exists and its requirements have not changed since the last run, it only checks the import.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-mxnet
python=${PYTHON:-python3}
stamp="$venv/.installed-from"
want=$(cat requirements/mxnet.txt pyproject.toml setup.py | sha256sum | cut -d' ' -f1)

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$venv/bin/python" -m pip install -q -r requirements/mxnet.txt
    "$venv/bin/python" -m pip install -q -e . --no-deps
    echo "$want" > "$stamp"
fi
"$venv/bin/python" -c "from layer_conformance.layerside.mxnet_shim import apply; apply(); import mxnet; print('mxnet', mxnet.__version__, 'in', '$venv')"
