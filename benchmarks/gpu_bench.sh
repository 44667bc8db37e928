#!/usr/bin/env bash
# The GPU runs recorded in docs/gpu-backend.md. Run from the repository root on a CUDA machine
# (OUT defaults to ./bench-out). Needs torch and numpy; dsi_ref is put on PYTHONPATH.
set -uo pipefail
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T=${TARGET:-llama-1b}
python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())'
if [ -z "${SKIP_PROBE:-}" ]; then
python3 benchmarks/concurrency_probe.py --model "$T" --length 1 --forwards 100 2>&1 | tee "$OUT/probe.log"
fi
for verify in ${VERIFY:-rejection greedy}; do
python3 -m dsi_ref.cli bench --target "$T" --drafter llama-68m \
    --lookahead "${LOOKAHEAD:-3,5,8}" --sp-degree "${SP:-2,4}" --new-tokens 128 --prompts "${PROMPTS:-3}" \
    --verify "$verify" --segments "${SEGMENTS:-4}" --json "$OUT/bench-$T-$verify.json" 2>&1 | tee "$OUT/bench-$T-$verify.log"
done
