#!/usr/bin/env python3
"""Write the training-log fixtures of tests/unit/test_trainlog.c.

Each report line is built with the format string the stack prints it with,
copied from its source (the same commits core/inputs/trainlog.c cites):
  [MLM]  NVIDIA/Megatron-LM @d98e8a64dd
  [M22]  NVIDIA/Megatron-LM @d63c254127
  [ZB]   sail-sg/zero-bubble-pipeline-parallelism @39f2c186a2
  [NEMO] NVIDIA/NeMo @8cfedd7203
  [TT]   pytorch/torchtitan @b5bcd76c66
  [TT24] pytorch/torchtitan @b39b8a47e9
  [PT]   pytorch/pytorch @ca70f656c9
  [MB]   NVIDIA-NeMo/Megatron-Bridge @067f987df
The other lines are noise of the kinds these logs hold.  The step times
are fixed lists (no randomness): the tests' expected figures follow from
them by hand.  Run from this directory: python3 make_fixtures.py
"""

from datetime import datetime, timedelta

T0 = datetime(2026, 8, 22, 10, 0, 0, 123456)


# ---------------------------------------------------------------------------
# Megatron-LM


def mlm_args(args, title="arguments"):
    """[MLM] megatron/training/arguments.py:1994-2001 ([M22] arguments.py:335-343)."""
    out = [f"------------------------ {title} ------------------------"]
    str_list = []
    for arg, val in args.items():
        dots = "." * (48 - len(arg))
        str_list.append("  {} {} {}".format(arg, dots, val))
    out += sorted(str_list, key=lambda x: x.lower())
    out.append(f"-------------------- end of {title} ---------------------")
    return out


def mlm_iteration(form, when, iteration, train_iters, consumed, ms, lr, gbs, loss,
                  loss_scale=1.0, grad_norm=1.0):
    """[MLM] training.py:3567-3641; [ZB] training.py:907-950; [M22] training.py:614-641."""
    if form == "mlm":
        s = f" [{when.strftime('%Y-%m-%d %H:%M:%S.%f')}]"
    elif form == "zb":
        s = f" [{when.strftime('%Y-%m-%d %H:%M:%S')}]"
    else:
        s = ""
    s += ' iteration {:8d}/{:8d} |'.format(iteration, train_iters)
    s += ' consumed samples: {:12d} |'.format(consumed)
    s += ' elapsed time per iteration (ms): {:.1f} |'.format(ms)
    if form == "mlm":
        s += f' throughput per GPU (TFLOP/s/GPU): {412.3:.1f} |'
        s += f' learning rate: {lr:.6E} |'
        s += f' global batch size: {gbs:5d} |'
    elif form == "zb":
        s += ' learning rate: {:.6E} |'.format(lr)
        s += ' global batch size: {:5d} |'.format(gbs)
    else:
        s += ' learning rate: {:.3E} |'.format(lr)
        s += ' global batch size: {:5d} |'.format(gbs)
    s += ' {}: {:.6E} |'.format('lm loss', loss)
    s += ' loss scale: {:.1f} |'.format(loss_scale)
    s += ' grad norm: {:.3f} |'.format(grad_norm)
    if form == "zb":
        s += ' optimizer rollback: {:.1f} |'.format(0.0)
    s += ' number of skipped iterations: {:3d} |'.format(0)
    s += ' number of nan iterations: {:3d} |'.format(0)
    return s


def mlm_memory(form, rank, name, alloc, max_alloc, resv, max_resv):
    """[MLM] training/utils/common_utils.py:321-334 ("{:.2f}");
    [M22] utils.py:95-106 and [ZB] training/utils.py:122-133 ("{}")."""
    string = name + ' memory (MB)'
    if form == "mlm":
        string += f" | allocated: {alloc:.2f}"
        string += f" | max allocated: {max_alloc:.2f}"
        string += f" | reserved: {resv:.2f}"
        string += f" | max reserved: {max_resv:.2f}"
    else:
        string += ' | allocated: {}'.format(alloc)
        string += ' | max allocated: {}'.format(max_alloc)
        string += ' | reserved: {}'.format(resv)
        string += ' | max reserved: {}'.format(max_resv)
    return "[Rank {}] {}".format(rank, string)


def megatron_current():
    """16 GPUs: TP 2, PP 4, DP 2; --log-interval 5, --train-iters 40.

    The last rank prints the iteration lines with the loss; the ranks of
    data-parallel rank 0 (0, 1, 4, 5, 8, 9, 12, 13: order tp-cp-ep-dp-pp)
    report memory after iterations 1 and 5 ([MLM] training.py:3679-3692).
    """
    step_ms = [24831.6, 1650.0, 1580.0, 1540.0, 1525.0]
    step_ms += [1500.0 + ((i * 37) % 23) - 11 for i in range(6, 41)]
    step_ms[22] = 1900.0  # iteration 23: a slow step (a straggler)
    gbs, interval = 64, 5
    lines = [
        "using world size: 16, data-parallel size: 2, context-parallel size: 1, "
        "tensor-model-parallel size: 2, pipeline-model-parallel size: 4",
        "WARNING: Setting args.overlap_p2p_comm to False since non-interleaved "
        "schedule does not support overlapping p2p communication",
    ]
    lines += mlm_args({
        "pipeline_model_parallel_size": 4, "tensor_model_parallel_size": 2,
        "world_size": 16, "use_tp_pp_dp_mapping": False, "log_interval": interval,
        "train_iters": 40, "micro_batch_size": 1, "global_batch_size": gbs,
        "seq_length": 4096, "data_parallel_size": 2,
    })
    lines += [
        "> building GPT2BPETokenizer tokenizer ...",
        "nid001:1234:1234 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>",
        "[after model, optimizer, and learning rate scheduler are built] datetime: "
        "2026-08-22 09:59:58 ",
        "training ...",
        "[before the start of training step] datetime: 2026-08-22 09:59:59 ",
    ]
    # (stage: max allocated MB after 1 and after 5 iterations)
    peak = {0: (40110.25, 52310.45), 1: (38004.5, 47011.2), 2: (36120.0, 44102.88),
            3: (39950.75, 49876.31)}
    when, consumed, last = T0, 0, 0
    for it in range(1, 41):
        when += timedelta(milliseconds=step_ms[it - 1])
        consumed += gbs
        if it % interval and it != 1:
            continue
        ms = sum(step_ms[last:it]) / (it - last)
        if it != 1:
            last = it
        lines.append(mlm_iteration("mlm", when, it, 40, consumed, ms, 3e-4 * min(1, it / 10),
                                   gbs, 10.5 - it * 0.05))
        if it in (1, 5):
            for rank in (0, 1, 4, 5, 8, 9, 12, 13):
                stage = rank // 4
                m = peak[stage][0 if it == 1 else 1] + (rank % 2) * 0.5
                lines.append(mlm_memory("mlm", rank, f'(after {it} iterations)', m * 0.6, m,
                                        m * 0.7 + 1024, m + 2048))
        if it == 20:
            lines.append("(min, max) time across ranks (ms):")
            lines.append("    forward-backward ...............................: "
                         "(1401.12, 1402.55)")
            lines.append(" validation loss at iteration 20 | lm loss value: 9.512000E+00 "
                         "| lm loss PPL: 1.352627E+04 | ")
            lines.append("[Rank 3] this rank has no memory report to make")
    lines.append("[after training is done] datetime: 2026-08-22 10:01:30 ")
    return lines


def megatron_2022():
    """8 GPUs: TP 2, PP 2, DP 2 (ranks 0, 1 and 4, 5 report memory: stages 0
    and 1); --log-interval 10.  The job is restarted from its checkpoint at
    iteration 20: the second run prints its arguments again and goes on from
    iteration 21 ([M22] training.py:607, 645-648)."""
    args = {"pipeline_model_parallel_size": 2, "tensor_model_parallel_size": 2,
            "world_size": 8, "log_interval": 10, "train_iters": 60}
    runs = [
        [(10, 3251.7), (20, 2900.4), (30, 2897.1), (40, 2902.8), (50, 2899.0)],
        [(30, 3120.5), (40, 2901.3), (50, 2898.6), (60, 2900.2)],
    ]
    mem = {0: 30511.123046875, 1: 30512.6240234375, 4: 27003.87109375, 5: 27004.0}
    lines = []
    for r, run in enumerate(runs):
        lines += mlm_args(args)
        lines.append("> initializing torch distributed ...")
        for i, (it, ms) in enumerate(run):
            lines.append(mlm_iteration("m22", None, it, 60, it * 32, ms, 1.5e-4, 32, 7.25))
            if i == 0:
                for rank, m in mem.items():
                    m += 512.0 * r
                    lines.append(mlm_memory("m22", rank, '(after {} iterations)'.format(it),
                                            m - 4096.0, m, m + 1000.0, m + 1536.25))
        if r == 0:
            lines.append("saving checkpoint at iteration      20 to checkpoints")
    return lines


def megatron_zb():
    """The zero-bubble fork on 4 GPUs, PP 4, logging every iteration; every
    rank is data-parallel rank 0 and reports memory."""
    lines = mlm_args({"pipeline_model_parallel_size": 4, "world_size": 4,
                      "enable_zero_bubble": True, "log_interval": 1})
    when = T0.replace(microsecond=0)
    ms = [9800.0, 1210.4, 1190.0] + [1100.0 + (i % 5) * 2.5 for i in range(4, 21)]
    for it in range(1, 21):
        when += timedelta(milliseconds=ms[it - 1])
        lines.append(mlm_iteration("zb", when, it, 20, it * 16, ms[it - 1], 1e-4, 16, 8.0))
        if it == 1:
            for rank in range(4):
                m = 20000.0 + 1000.0 * (3 - rank) + 0.1171875
                lines.append(mlm_memory("zb", rank, '(after {} iterations)'.format(it),
                                        m / 2, m, m + 100.0, m + 2048.0))
    return lines


def bridge_memory(rank, iteration, max_alloc_gb, max_resv_gb):
    """[MB] src/megatron/bridge/training/utils/train_utils.py:1145-1150, the
    keys of MEMORY_KEYS (166-177) with "bytes" made "gigabytes" and the
    values bytes / 1e9 rounded to 5 significant digits (1200-1206)."""
    s = f"(after {iteration} iterations) memory (GB)"
    for name, val in (("mem-allocated-gigabytes", round(max_alloc_gb * 0.6, 3)),
                      ("mem-active-gigabytes", round(max_alloc_gb * 0.6, 3)),
                      ("mem-inactive-gigabytes", 0.41),
                      ("mem-reserved-gigabytes", max_resv_gb),
                      ("mem-max-allocated-gigabytes", max_alloc_gb),
                      ("mem-max-active-gigabytes", max_alloc_gb),
                      ("mem-max-inactive-gigabytes", 2.3),
                      ("mem-max-reserved-gigabytes", max_resv_gb),
                      ("mem-alloc-retires", 0), ("mem-allocated-count", 5120)):
        s += f" | {name}: {val}"
    return "[Rank {}] {}".format(rank, s)


def megatron_bridge():
    """Megatron-Bridge on 8 GPUs, TP 2, DP 4; log_interval 5, train_iters 30.

    The last rank prints Megatron-LM's iteration line (time stamp without
    microseconds) at multiples of the interval only ([MB] train_utils.py:
    1018, 1088-1140); the ranks of data-parallel rank 0 (0 and 1) report
    memory after the first logged iteration (1141-1154).  No argument list.
    """
    lines = ["[NeMo I 2026-08-22 10:00:00 recipe:12] Using performance recipe "
             "llama3_8b_pretrain_config"]
    when = T0.replace(microsecond=0)
    ms = [4000.0, 1300.0, 1290.0, 1280.0, 1270.0, 1260.0]
    for k, it in enumerate(range(5, 31, 5)):
        when += timedelta(milliseconds=5 * ms[k])
        s = mlm_iteration("zb", when, it, 30, it * 128, ms[k], 3e-4, 128, 7.5)
        lines.append(s)
        if it == 5:
            lines.append(bridge_memory(0, it, 61.234, 70.5))
            lines.append(bridge_memory(1, it, 60.987, 70.25))
    return lines


# ---------------------------------------------------------------------------
# NeMo 2.0


def nemo_format(prefix, metrics):
    """[NEMO] lightning/pytorch/callbacks/progress_printer.py:56-63."""
    log_string = prefix
    for metric, val in metrics.items():
        if isinstance(val, (float)) and val.is_integer():
            val = int(val)
            log_string += f' | {metric}: {val}'
        else:
            log_string += f' | {metric}: {val:.4}'
    return log_string


def nemo_progress(epoch, n, total, metrics):
    """[NEMO] progress_printer.py:140: prefix "Training epoch E, iteration n-1/total-1"."""
    prefix = "Training" + f" epoch {epoch}, iteration {n-1}/{total-1}"
    return nemo_format(prefix, metrics)


def nemo_noise():
    return [
        "[NeMo W 2026-08-22 10:00:00 nemo_logging:405] No version folders would be created.",
        "GPU available: True (cuda), used: True",
        "[NeMo I 2026-08-22 10:00:01 nemo_logging:393] Experiments will be logged at "
        "/results/llama3_8b",
        "  | Name   | Type     | Params | Mode ",
        "----------------------------------------",
        "0 | module | GPTModel | 4.0 B  | train",
    ]


def nemo_printer():
    """ProgressPrinter every step (progress_interval 1, the default) with
    TimingCallback and log_memory_usage; rank 0 prints, and 16 of 100 steps
    ran.  A validation pass at step 8 prints its own iteration lines."""
    times = [31.25, 4.518, 2.9034, 2.8871, 2.8875, 2.8902, 2.8866, 2.8889,
             2.891, 2.8854, 2.8931, 2.8847, 2.8878, 2.8899, 2.8863, 2.8915]
    lines = nemo_noise()
    for n in range(1, 17):
        resv = float(60129542144 + n * 1048576)
        alloc = float(53687091200 + (n % 3) * 2097152)
        metrics = {"global_step": float(n - 1), "max_memory_reserved": resv,
                   "max_memory_allocated": alloc, "reduced_train_loss": 11.0 - n * 0.1234,
                   "lr": 1.5e-7 * n, "consumed_samples": float(512 * n),
                   "train_step_timing in s": times[n - 1]}
        lines.append(nemo_progress(0, n, 100, metrics))
        if n == 8:
            lines.append("Validation: iteration 1/2")
            lines.append("Validation: iteration 2/2")
    return lines


def nemo_delta():
    """DeltaTimingCallback ([NEMO] utils/exp_manager.py:450) in place of
    TimingCallback: the progress lines carry the memory but no time."""
    times = [35.61234, 3.10456, 2.9911, 2.99872, 3.0042, 2.99631, 3.0018, 2.9987,
             3.00144, 2.99759, 3.0031, 2.99902, 3.00063, 2.9969]
    lines = nemo_noise()
    for k, dt in enumerate(times):
        lines.append(f'[NeMo I 2026-08-22 10:01:{k:02d} exp_manager:450] '
                     f'Step {k}: train_step_timing in s={dt}')
        metrics = {"global_step": float(k), "max_memory_reserved": 7.1e10 + k * 1024.5,
                   "max_memory_allocated": 6.4e10 + 0.5, "reduced_train_loss": 9.5}
        lines.append(nemo_progress(0, k + 1, 100, metrics))
    return lines


# ---------------------------------------------------------------------------
# torchtitan


class Color:
    """[TT] torchtitan/tools/utils.py:263-274."""
    red = "\033[31m"
    green = "\033[32m"
    yellow = "\033[33m"
    blue = "\033[34m"
    magenta = "\033[35m"
    cyan = "\033[36m"
    reset = "\033[39m"
    orange = "\033[38;2;180;60;0m"
    turquoise = "\033[38;2;54;234;195m"


def titan_info(when, msg, level="INFO"):
    """[TT] torchtitan/tools/logging.py:21."""
    asctime = when.strftime('%Y-%m-%d %H:%M:%S') + f",{when.microsecond // 1000:03d}"
    return f"[titan] {asctime} - root - {level} - {msg}"


def titan_step(step, loss, grad_norm, gib, pct, tps, tflops, mfu):
    """[TT] torchtitan/components/metrics.py:526-536."""
    color = Color
    mfu_str = f"{mfu:.2f}%" if mfu is not None else "N/A"
    return (f"{color.red}step: {step:2}  "
            f"{color.green}loss: {loss:8.5f}  "
            f"{color.orange}grad_norm: {grad_norm:7.4f}  "
            f"{color.turquoise}memory: {gib:5.2f}GiB"
            f"({pct:.2f}%)  "
            f"{color.blue}tps: {round(tps):,}  "
            f"{color.cyan}tflops: {tflops:,.2f}  "
            f"{color.magenta}mfu: {mfu_str}{color.reset}")


def torchtitan():
    """8 GPUs on one node: PP 2, FSDP 2, TP 2; LOG_RANK=0,7 so that the last
    stage's rank 7 prints the loss and rank 0 prints -1 ([TT] trainer.py:840);
    torchrun --role rank --tee 3 prefixes "[rank0]:" and "[rank7]:"
    ([TT] run_train.sh:46, [PT] tail_log.py:118); log_freq 10."""
    tokens_per_step, world = 131072, 8
    step_s = {1: 45.0, 10: 2.05, 20: 2.0, 30: 2.01, 40: 1.99, 50: 2.02, 60: 2.0}
    when = T0
    head = [
        titan_info(when, "Starting job: Llama 3 8B training"),
        titan_info(when, "Building device mesh with parallelism: pp=2, dp_replicate=1, "
                   "dp_shard=2, cp=1, tp=2, ep=1"),
        titan_info(when, "CUDA capacity: NVIDIA H100 80GB HBM3 with 79.19GiB memory"),
        titan_info(when, f"{Color.blue}Model llama3 8B {Color.red}size: 8,030,261,248 "
                   f"total parameters{Color.reset}"),
        # [TT] trainer.py:621-629
        titan_info(when, "Trainer is initialized with "
                   f"{16384} tokens per DP rank, "
                   f"{tokens_per_step} tokens per train step, "
                   f"gradient accumulation steps {4}, "
                   f"maximum context length {8192}, "
                   f"total steps {60} "
                   f"(warmup {20})"),
        titan_info(when, f"Training starts at step {0 + 1}"),
    ]
    lines = []
    for h in head:
        lines += ["[rank0]:" + h, "[rank7]:" + h]
    for step, s in step_s.items():
        when += timedelta(seconds=s)
        tps = tokens_per_step / world / s
        for rank, loss, gib in ((0, -1.0, 61.234), (7, 8.25 - step * 0.05, 58.876)):
            lines.append(f"[rank{rank}]:" + titan_info(
                when, titan_step(step, loss, 1.25, gib + step * 0.001, gib / 79.19 * 100,
                                 tps, tps * 4.8e10 / 1e12, tps * 4.8e10 / 9.89e14 * 100)))
        if step == 30:
            lines.append("[rank7]:" + titan_info(when, "3 CUDA memory allocation retries.",
                                                 "WARNING"))
            # [TT] metrics.py:570-576
            lines.append("[rank7]:" + titan_info(
                when, f"{Color.yellow}validate step: {step:2}  "
                f"{Color.green}loss: {2.3456:7.4f}  "
                f"{Color.turquoise}memory: {59.1:5.2f}GiB({74.63:.2f}%)  "
                f"{Color.blue}tps: {round(9123.4):,}{Color.reset}"))
    lines.append("[rank0]:" + titan_info(when, "Training completed"))
    return lines


def torchtitan_2024():
    """[TT24] train.py:393-400: "wps", no tokens-per-step line, one rank."""
    lines = [titan_info(T0, "Starting job: Llama 3 8B training")]
    when = T0
    for step, wps in ((1, 350.4), (10, 6020.7), (20, 6100.2), (30, 6095.5), (40, 6101.9)):
        when += timedelta(seconds=2)
        c = Color
        lines.append(titan_info(when, f"{c.cyan}step: {step:2}  "
                                f"{c.green}loss: {7.5:7.4f}  "
                                f"{c.yellow}memory: {70.5 + step * 0.01:5.2f}GiB"
                                f"({89.02:.2f}%)  "
                                f"{c.blue}wps: {round(wps):,}  "
                                f"{c.magenta}mfu: {38.5:.2f}%{c.reset}"))
    return lines


def write(name, lines):
    with open(name, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    write("megatron.log", megatron_current())
    write("megatron-2022.log", megatron_2022())
    write("megatron-zb.log", megatron_zb())
    write("megatron-bridge.log", megatron_bridge())
    write("nemo.log", nemo_printer())
    write("nemo-delta.log", nemo_delta())
    write("torchtitan.log", torchtitan())
    write("torchtitan-2024.log", torchtitan_2024())
    # Broken logs: the good lines of a stack, then a report cut short.
    mlm = megatron_current()
    cut = [i for i, l in enumerate(mlm) if "iteration       15/" in l][0]
    mlm[cut] = mlm[cut][:mlm[cut].index("elapsed time per iteration (ms):") + 33]
    write("megatron-broken.log", mlm[:cut + 1])
    nemo = nemo_printer()[:10]
    nemo.append(nemo_progress(0, 5, 100, {"global_step": 4.0,
                                          "train_step_timing in s": float("nan")}))
    write("nemo-broken.log", nemo)
    tt = torchtitan()[:16]
    tt.append(tt[-1][:tt[-1].index("memory:")])
    write("torchtitan-broken.log", tt)


if __name__ == "__main__":
    main()
