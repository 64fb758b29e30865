#!/usr/bin/env bash
# The training companion on a GPU (bench/gpu_check.py: CUDA end to end, spatial equivalence
# on the device, memory per rank, the performance model's predictions), in under 8 minutes
# on one H200.  Writes OUT/gpu_check.json and OUT/artifacts.tar.part-* (logs, metrics, the
# exported QONNX files, the calibration); docs/results/gpu_check.md is made from them by
# `python bench/gpu_report.py`.
#
#   bench/gpu_check.sh [--out OUT] [--stages 1,2,3,4]     # CUDA (default OUT: runs/gpu_check)
#   bench/gpu_check.sh --out OUT2 --stages 5              # the tests marked gpu (about 2 minutes)
#   bench/gpu_check.sh --cpu [--out OUT]                  # rehearsal: CPU, gloo, tiny sizes
#
# Without an installed tessera the checkout itself is imported (a link named tessera to it in
# a temporary folder on PYTHONPATH).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
py="${PYTHON:-python3}"
args=()
cpu=0
out="$root/runs/gpu_check"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --cpu) cpu=1; args+=(--cpu); shift ;;
        --out) out="$2"; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
if [[ $cpu -eq 0 ]] && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no GPU found (nvidia-smi); bench/gpu_check.sh --cpu rehearses the same code paths on CPU" >&2
    exit 3
fi
if ! "$py" -c "import tessera.training" >/dev/null 2>&1; then
    shim="$(mktemp -d)"
    ln -s "$root" "$shim/tessera"
    export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
fi
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [[ $cpu -eq 1 ]]; then export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"; fi
set -o pipefail
timeout 470 "$py" "$here/gpu_check.py" run --out "$out" "${args[@]}" 2>&1 | tee "$out/gpu_check.log"
