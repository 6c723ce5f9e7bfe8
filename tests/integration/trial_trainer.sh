#!/bin/bash
# trial_trainer.sh FORMAT TABLE SEQ_LEN: the training job test_trial.sh's
# `pipette trial` runs.  It stands in for Megatron-LM (FORMAT megatron) or
# torchtitan (FORMAT torchtitan): rank 0 prints the stack's step reports
# (the format strings of tests/data/trainlogs/make_fixtures.py, each cited
# there from the stack's source) every 50 ms, and keeps going until the
# trial stops it.  Its step time is the plan's prediction
# (PIPETTE_PREDICTED_ITER_S, which the plugin exported) times a factor the
# model cannot know, looked up by the plan's hash in TABLE ("HASH FACTOR",
# or "HASH oom|crash|hang": the trial must record and skip those; or
# "HASH noisy": factor 1, and 24 MiB of other lines before each step
# report, as NCCL_DEBUG=INFO prints, so that the log passes 256 MiB by
# the 11th report).
set -u
fmt=$1 table=$2 seq=$3
[ "${SLURM_PROCID:-0}" = 0 ] || exit 0
what=$(awk -v h="${PIPETTE_PLAN_HASH:-none}" '$1 == h { print $2 }' "$table")
case ${what:=1.0} in
oom)
    # PyTorch's message (c10/cuda/CUDACachingAllocator.cpp)
    echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.50 GiB is free."
    exit 1 ;;
crash)
    echo "Traceback (most recent call last):"
    echo "RuntimeError: NCCL communicator was aborted on rank 0."
    exit 3 ;;
hang)
    exec sleep 600 ;;
noisy)
    noise=$((24 << 20)) what=1.0 ;;
esac
world=$((PIPETTE_TP * PIPETTE_PP * PIPETTE_DP * PIPETTE_CP))
tokens=$((PIPETTE_GLOBAL_BATCH * seq))
gb=$PIPETTE_GLOBAL_BATCH
total=$((PIPETTE_TRIAL_STEPS * 4))
for ((i = 1; i <= total; i++)); do
    [ -n "${noise-}" ] &&
        yes 'node1:1234:1300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read' | head -c "$noise"
    # the first step slow, as warm-up is; then +-0.4% of jitter
    step_s=$(awk -v t="$PIPETTE_PREDICTED_ITER_S" -v f="$what" -v i="$i" \
        'BEGIN { printf "%.6f", t * f * (i == 1 ? 3 : 1 + 0.002 * ((i * 7) % 5 - 2)) }')
    if [ "$fmt" = megatron ]; then
        awk -v i="$i" -v n="$total" -v s="$step_s" -v gb="$gb" 'BEGIN {
            printf " iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | learning rate: %.3E | global batch size: %5d | lm loss: %.6E | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n", i, n, i * gb, 1000 * s, 1.5e-4, gb, 7.25 }'
    else
        awk -v i="$i" -v s="$step_s" -v tok="$tokens" -v w="$world" 'BEGIN {
            printf "[rank0]:[titan] 2026-08-22 10:00:%02d,123 - root - INFO - step: %2d  loss:  8.20000  grad_norm:  1.2500  memory: 61.23GiB(77.33%%)  tps: %d  tflops: 17.48  mfu: 1.77%%\n", i % 60, i, tok / (s * w) }'
    fi
    sleep 0.05
done
