#!/usr/bin/env bash
# Single-extra environments: the wheel, built as a user builds it (python -m build), installed with one
# extra alone into a venv of its own, as a user of one framework installs it:
#   torch, tensorflow, jax, mxnet   the extra, on the versions pinned for development (requirements/)
#   torch-oldest                    the torch extra on the oldest versions the metadata admits
# Usage: scripts/wheel-envs.sh [NAME...] (default: all). Prints "NAME PYTHON" for each.
# Cached: a venv is rebuilt only when its dependencies changed (the package's requirements and the extra's, as
# pyproject.toml states them, and its constraints file); when anything else changed (the package's files, its
# entry points, its layout), the new wheel replaces the old one in it.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
build_python=${BUILD_PYTHON:-.venv/bin/python}   # has the `build` package (the test extra)
# outside the checkout, so that a fresh clone (CI's) reuses them: a venv's first build takes minutes
root=${WHEEL_VENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/layer-conformance/venvs}
mkdir -p "$root"
exec 9>"$root/.lock"
flock 9   # one builder at a time (parallel test workers share the venvs)

extra_of() { case "$1" in torch-oldest) echo torch ;; *) echo "$1" ;; esac; }
constraints_of() {
    case "$1" in
        torch-oldest) echo requirements/torch-oldest.txt ;;
        mxnet) echo requirements/mxnet.txt ;;
        *) echo requirements/dev.txt ;;
    esac
}
hash_files() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }
# what the extra installs: the requirements pyproject.toml states for the package and for that extra
requirements_of() {
    "$python" -c 'import sys, tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print(p["dependencies"], p["optional-dependencies"][sys.argv[1]])' "$1"
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(torch tensorflow jax mxnet torch-oldest)
for name in "${names[@]}"; do
    case "$name" in torch|tensorflow|jax|mxnet|torch-oldest) ;; *) echo "unknown environment: $name" >&2; exit 4 ;; esac
done

# what goes into the wheel: the package's files as git sees them (tracked and new, not ignored)
mapfile -d '' inputs < <(git ls-files -z --cached --others --exclude-standard -- \
    harness reference_impls specs pyproject.toml setup.py README.md | sort -z)
existing=()
for f in "${inputs[@]}"; do [ -f "$f" ] && existing+=("$f"); done
wheel_stamp=$(hash_files "${existing[@]}")
dist="$root/dist/$wheel_stamp"

build_wheel() {
    if ! ls "$dist"/*.whl >/dev/null 2>&1; then
        local src
        src=$(mktemp -d)
        # a clean copy: building in the checkout would leave build/ and egg-info behind
        for f in "${existing[@]}"; do mkdir -p "$src/$(dirname "$f")"; cp "$f" "$src/$f"; done
        rm -rf "$root/dist"
        "$build_python" -m build --wheel --outdir "$dist" "$src" >/dev/null
        rm -rf "$src"
    fi
    wheel=$(ls "$dist"/*.whl)
}

for name in "${names[@]}"; do
    venv="$root/$name"
    constraints=$(constraints_of "$name")
    deps_stamp=$( (requirements_of "$(extra_of "$name")"; cat "$constraints") | sha256sum | cut -d' ' -f1)-$("$python" -c 'import sys; print(sys.version.split()[0])')
    if [ "$(cat "$venv/.deps" 2>/dev/null)" != "$deps_stamp" ]; then
        build_wheel
        rm -rf "$venv"
        "$python" -m venv "$venv"
        # --no-compile: byte-compiling the frameworks' files is most of an install's time and serves no run
        "$venv/bin/python" -m pip install -q --no-compile "$wheel[$(extra_of "$name")]" -c "$constraints"
        echo "$deps_stamp" > "$venv/.deps"
        echo "$wheel_stamp" > "$venv/.wheel"
    elif [ "$(cat "$venv/.wheel" 2>/dev/null)" != "$wheel_stamp" ]; then
        build_wheel
        "$venv/bin/python" -m pip install -q --no-compile --no-deps --force-reinstall "$wheel"
        echo "$wheel_stamp" > "$venv/.wheel"
    fi
    echo "$name $venv/bin/python"
done
