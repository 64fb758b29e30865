#!/usr/bin/env bash
# GPU check of the training companion (under 5 minutes): CosmoFlow training steps on the
# sharded model with NCCL-backed process groups, one rank per GPU; step time and
# torch.cuda.max_memory_allocated per rank -> docs/results/gpu_check.json.
#
#   bench/gpu_check.sh                 # CUDA + NCCL, one rank per visible GPU, 128^3, width 1
#   bench/gpu_check.sh --cpu           # the same on CPU with gloo (2 ranks, 32^3, width 0.25)
#
# Extra arguments go to bench/gpu_check.py (e.g. --size 64 --spatial 2x1x1).  NCCL needs one
# GPU per rank: with N GPUs the default grid is N x 1 x 1 (N in 1, 2, 4, 8).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
py="${PYTHON:-python}"
out="$root/docs/results/gpu_check.json"
if [[ "${1:-}" == "--cpu" ]]; then
    shift
    out="$root/docs/results/gpu_check_cpu.json"
    nproc=2
    args=(--cpu --size 32 --width 0.25 --spatial 2x1x1 "$@")
else
    nproc="$(nvidia-smi -L 2>/dev/null | wc -l || true)"
    if [[ "$nproc" -lt 1 ]]; then
        echo "gpu_check: no GPU found (nvidia-smi); run with --cpu for the gloo path" >&2
        exit 3
    fi
    args=(--spatial "${nproc}x1x1" "$@")
fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec timeout 300 "$py" -m torch.distributed.run --nproc-per-node "$nproc" "$here/gpu_check.py" --out "$out" "${args[@]}"
