#!/usr/bin/env bash
# The GPU runs recorded in docs/gpu-backend.md. Run from the repository root on a CUDA machine
# (OUT defaults to ./bench-out). Needs torch, numpy, scipy, sympy, tqdm and z3-solver (the CLI
# loads every command); dsi_ref is prepended to PYTHONPATH.
#   benchmarks/gpu_bench.sh                      # probe + 1B/68M (rejection, greedy) + 7B/68M
#   SKIP_PROBE=1 SKIP_7B=1 VERIFY=rejection benchmarks/gpu_bench.sh
# PROBE_LENGTHS (default "1 4 6 9"): query lengths of the concurrency probe (k + 1 for k = 3, 5, 8)
# A smoke run of the whole pipeline on a CPU, with tiny models, in about a minute:
#   OUT=/tmp/smoke TARGET=tiny-target DRAFTER=tiny-drafter TAG=tiny DTYPE=fp64 NEW_TOKENS=12 \
#     PROMPTS=2 LOOKAHEAD=2 SP=2 SKIP_7B=1 benchmarks/gpu_bench.sh
# On a machine with several GPUs it also runs the paper's setting: the drafter on cuda:0 and the
# target servers on cuda:1 .. cuda:(n-1), one GPU each (--server-devices). It ends with the
# host-overhead benchmark and $OUT/summary.md (the tables of docs/gpu-backend.md, all three kinds).
set -uo pipefail
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
TARGET=${TARGET:-llama-1b}; DRAFTER=${DRAFTER:-llama-68m}; TAG=${TAG:-1b}
COMMON=(--new-tokens "${NEW_TOKENS:-128}" --prompts "${PROMPTS:-5}" --dtype "${DTYPE:-bf16}")
python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA")'
# BATCHED=1 adds, BATCHED=only runs just, the batched loop on llama-7b/68M (a few minutes on an
# H100, not yet run): its profile (batched_loop_profile.py, real forwards), dsi-ref bench --batched
if [ -n "${BATCHED:-}" ]; then
    python3 benchmarks/batched_loop_profile.py --target llama-7b --drafter llama-68m \
        --device cuda --dtype bf16 --lookahead 5 --sp-degree 2,4 --new-tokens 128 --runs 3 \
        2>&1 | tee "$OUT/batched-profile-7b.log"
    python3 -m dsi_ref.cli bench --target llama-7b --drafter llama-68m --lookahead 5 \
        --sp-degree 2,4 --new-tokens 128 --prompts 3 --verify rejection --batched \
        --json "$OUT/bench-7b-rejection-batched.json" 2>&1 | tee "$OUT/bench-7b-rejection-batched.log"
    [ "$BATCHED" = only ] && exit 0
fi
if [ -z "${SKIP_PROBE:-}" ]; then
    : > "$OUT/probe.log"   # length 1 first (summarize.py reads that block), then verifications
    for length in ${PROBE_LENGTHS:-1 4 6 9}; do
        python3 benchmarks/concurrency_probe.py --model "$TARGET" --drafter "$DRAFTER" \
            --length "$length" --forwards 100 --sp-degree 4 2>&1 | tee -a "$OUT/probe.log"
    done
fi
for verify in ${VERIFY:-rejection greedy}; do
    python3 -m dsi_ref.cli bench --target "$TARGET" --drafter "$DRAFTER" "${COMMON[@]}" \
        --lookahead "${LOOKAHEAD:-3,5,8}" --sp-degree "${SP:-2,3,4}" \
        --verify "$verify" --segments "${SEGMENTS:-4}" \
        --json "$OUT/bench-$TAG-$verify.json" 2>&1 | tee "$OUT/bench-$TAG-$verify.log"
done
if [ -z "${SKIP_7B:-}" ]; then
    python3 -m dsi_ref.cli bench --target llama-7b --drafter llama-68m --lookahead 3,5 \
        --sp-degree 2 --new-tokens 128 --prompts 3 --verify rejection \
        --json "$OUT/bench-7b-rejection.json" 2>&1 | tee "$OUT/bench-7b-rejection.log"
fi
GPUS=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ "$GPUS" -ge 2 ]; then
    DEVICES=$(seq -s, -f 'cuda:%g' 1 $((GPUS - 1)))
    SPS=$(seq -s, $((GPUS > 2 ? 2 : 1)) $((GPUS - 1)))
    python3 -m dsi_ref.cli bench --target "$TARGET" --drafter "$DRAFTER" "${COMMON[@]}" \
        --lookahead "${LOOKAHEAD:-3,5,8}" --sp-degree "$SPS" \
        --verify rejection --segments "${SEGMENTS:-4}" --server-devices "$DEVICES" \
        --json "$OUT/bench-$TAG-rejection-multigpu.json" 2>&1 \
        | tee "$OUT/bench-$TAG-rejection-multigpu.log"
fi
# the host's own cost per token (instant models: no forwards), and the tables of docs/gpu-backend.md
python3 benchmarks/bench_host_overhead.py 2>&1 | tee "$OUT/host-overhead.log"
python3 benchmarks/summarize.py "$OUT"/bench-*.json > "$OUT/summary.md"
echo >> "$OUT/summary.md"
python3 benchmarks/summarize.py --shared "$OUT/probe.log" "$OUT"/bench-*.json >> "$OUT/summary.md"  # a missing log is skipped
echo >> "$OUT/summary.md"
python3 benchmarks/summarize.py --verify "$OUT"/bench-*.json >> "$OUT/summary.md"  # every input measured
