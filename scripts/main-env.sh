#!/usr/bin/env bash
# Creates .venv: the main environment (numpy 2, torch CPU, TensorFlow CPU, JAX + Flax, at the exact versions
# of requirements/dev.txt) with the harness installed editable. Idempotent: reinstalls only when
# pyproject.toml or requirements/dev.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
python=${PYTHON:-python3}
stamp="$venv/.installed-from"
want=$(cat pyproject.toml setup.py requirements/dev.txt | sha256sum | cut -d' ' -f1)

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -r requirements/dev.txt -e ".[torch,tensorflow,jax,test]"
    echo "$want" > "$stamp"
fi
"$venv/bin/python" -c "import numpy, torch, tensorflow, jax, flax; print('main environment: numpy', numpy.__version__, '| torch', torch.__version__, '| tensorflow', tensorflow.__version__, '| jax', jax.__version__, '| flax', flax.__version__)" 2>/dev/null
