#!/usr/bin/env bash
# bench/gpu.py on a machine with an NVIDIA GPU and JAX with CUDA, from the repository root: bash bench/gpu.sh [OUT [options of bench/gpu.py]]
# Installs the wheels in .whl/ (what the machine's image lacks: pydantic, zarr, dask, ...) into a directory of its own,
# runs attnlab from src/, and writes OUT/gpu.json and OUT/gpu.log. Fetch the wheels beforehand, where pip can reach
# an index (the image has Python 3.12):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     --platform manylinux1_x86_64 -d .whl -r bench/gpu_wheels.txt
set -u
OUT=${1:-gpu-out}
mkdir -p "$OUT"
SITE=${TMPDIR:-/tmp}/attnlab-site
if compgen -G ".whl/*.whl" > /dev/null; then
    # a failed install is recorded and the run goes on: the stages that need a missing package fail on their own
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
        > "$OUT/install.log" 2>&1 || echo "installing .whl/ failed (see $OUT/install.log); going on" >&2
fi
export PYTHONPATH="$PWD/src:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 MPLBACKEND=Agg
set -o pipefail
python3 bench/gpu.py all --out "$OUT" --deadline "${DEADLINE:-450}" "${@:2}" 2>&1 | tee "$OUT/gpu.log"
