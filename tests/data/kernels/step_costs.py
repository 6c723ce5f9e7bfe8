#!/usr/bin/env python3
"""The fixed costs of a training step and the FP8 casts, timed on one GPU.

Times (CUDA events, median after warm-up, repetitions sized to ~20 ms):
- `loss`: the output layer's loss over T tokens and a vocabulary V: eager
  cross entropy on bf16 logits upcast to fp32 (what torchtitan and plain
  PyTorch run), forward + backward, with its peak memory above the logits
  (torch.cuda.max_memory_allocated), per logit;
- `adamw`: torch.optim.AdamW(fused=True) step over N fp32 parameters with
  fp32 gradients (the optimizer step of an FSDP shard), and clip_grad_norm_
  (foreach) over the same gradients;
- `cast`: the FP8 quantisation of a bf16 tensor: amax, scale and cast to
  float8_e4m3fn (tensorwise), and the same with a transposed copy, per
  element; and a bf16 copy (the HBM roofline of the same bytes);
- `sdpa`: causal attention forward+backward with the flash (FlashAttention-2)
  and cuDNN backends forced, per shape, so their ratio is measured on more
  than one shape.
Writes $OUT/step_costs.csv: kind,what,size,seconds,extra.  Stdlib + torch.
"""
import csv, os, time

import torch
import torch.nn.functional as F

OUT = os.environ.get('OUT', './out')
os.makedirs(OUT, exist_ok=True)
dev = torch.device('cuda')
rows = []


def timed(fn, target=0.02):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(); e.record(); torch.cuda.synchronize()
    one = max(s.elapsed_time(e) / 1e3, 1e-6)
    reps = max(3, min(200, int(target / one)))
    ts = []
    for _ in range(reps):
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def loss_case(T, V):
    logits = torch.randn(T, V, device=dev, dtype=torch.bfloat16, requires_grad=True)
    tgt = torch.randint(0, V, (T,), device=dev)

    def step():
        loss = F.cross_entropy(logits.float(), tgt)
        loss.backward()
        logits.grad = None
    sec = timed(step)
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step(); torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    rows.append(('loss', 'eager_ce_fp32', T * V, sec, peak / (T * V)))
    del logits


def adamw_case(n):
    p = torch.nn.Parameter(torch.randn(n, device=dev, dtype=torch.float32))
    p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
    rows.append(('adamw', 'fused_fp32', n, timed(opt.step), 0))
    rows.append(('clip', 'foreach_fp32', n,
                 timed(lambda: torch.nn.utils.clip_grad_norm_([p], 1.0, foreach=True)), 0))
    del p, opt


def cast_case(n):
    x = torch.randn(n // 4096, 4096, device=dev, dtype=torch.bfloat16)
    f8 = torch.float8_e4m3fn
    mx = torch.finfo(f8).max

    def tensorwise():
        s = mx / x.abs().amax().float().clamp(min=1e-12)
        return (x.float() * s).clamp(-mx, mx).to(f8)

    def with_transpose():
        s = mx / x.abs().amax().float().clamp(min=1e-12)
        q = (x.float() * s).clamp(-mx, mx).to(f8)
        return q, q.t().contiguous()
    rows.append(('cast', 'fp8_tensorwise_eager', n, timed(tensorwise), 0))
    ct = torch.compile(tensorwise)
    rows.append(('cast', 'fp8_tensorwise_compiled', n, timed(ct), 0))
    rows.append(('cast', 'fp8_tensorwise_transpose_eager', n, timed(with_transpose), 0))
    rows.append(('cast', 'bf16_copy', n, timed(lambda: x.clone()), 0))
    del x


def sdpa_case(h, kv, s):
    from torch.nn.attention import sdpa_kernel, SDPBackend
    q = torch.randn(1, h, s, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, h, s, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, h, s, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
    for name, be in (('flash2', SDPBackend.FLASH_ATTENTION), ('cudnn', SDPBackend.CUDNN_ATTENTION)):
        def step():
            with sdpa_kernel(be):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o.sum().backward()
        try:
            rows.append(('sdpa', name, h * s, timed(step), s))
        except Exception as ex:  # a backend that refuses the shape
            print('sdpa', name, h, s, 'skipped:', str(ex)[:80])


t0 = time.time()
for T, V in ((4096, 128256), (8192, 128256), (16384, 128256), (8192, 32000), (8192, 256000)):
    loss_case(T, V)
for n in (10**8, 5 * 10**8, 10**9):
    adamw_case(n)
for n in (2**24, 2**26, 2**28):
    cast_case(n)
for h, s in ((32, 4096), (32, 8192), (8, 8192), (64, 8192), (32, 16384)):
    sdpa_case(h, h, s)
print('done in %.0f s on %s' % (time.time() - t0, torch.cuda.get_device_name()))
with open(os.path.join(OUT, 'step_costs.csv'), 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(['kind', 'what', 'size', 'seconds', 'extra'])
    for r in rows:
        w.writerow(r)
for r in rows:
    print(*r)
