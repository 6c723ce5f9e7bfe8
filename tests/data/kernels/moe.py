#!/usr/bin/env python3
"""One MoE layer's expert block as Megatron-Core runs it on an EP rank, timed
on one GPU.

What one rank of an expert-parallel group of EP ranks does per micro-batch
of T tokens, after the dispatch has brought it its local experts' token
copies (balanced routing, as the published runs force it: T x topk copies
over E/EP local experts, each expert T x topk x EP / E rows):

- `router`: the router GEMM (bf16, T x E), fp32 softmax, top-k, and the
  permutation of the T x topk token copies into expert order (argsort of
  the expert ids, gather) and its inverse after the experts (a weighted
  scatter-add), forward + backward (Megatron-Core's
  megatron/core/transformer/moe/moe_utils.py permute / unpermute);
- the experts: fc1 (h -> 2f, SwiGLU) and fc2 (f -> h) of every local
  expert, forward + backward, as
  - `bf16_loop`: one cuBLAS GEMM per expert and pass, in a single autograd
    function over all experts (what Transformer Engine's GroupedLinear does
    on Hopper: one call, a loop of GEMMs inside);
  - `bf16_grouped`: torch._grouped_mm, one grouped kernel per pass;
  - `fp8_loop`: FP8 with per-tensor current scaling per expert: each
    expert's input (forward) and output gradient (backward) quantised
    (amax, scale, cast, and the transposed copy the weight gradient needs),
    weights quantised once, torch._scaled_mm per expert and pass;
  - `dense`: the same FLOPs as one GEMM per pass (T x topk rows), the
    bound a perfectly grouped kernel approaches.
Each is timed three ways: `gpu` (the forward + backward captured in a CUDA
graph and replayed: the GPU's time alone), `eager` (run eagerly, with the
device-to-host copy of the per-expert token counts that the all-to-all
dispatcher makes before its exchange; wall clock per iteration), the same
without that copy (`eager_nosync`: the host may run ahead), and `host`
(the CPU time to issue one eager forward + backward while the GPU is kept
busy ahead of it: the host's pace), with the kernels each iteration
launches (`launches`, from the profiler).

Shapes: the local shapes of the published Megatron-Bridge MoE runs at EP 8
(Qwen3-30B-A3B, Qwen3-235B-A22B, GPT-OSS-120B, DeepSeek-V3) for micro-batches
of 1..8 sequences of 4096 tokens.  With TOKENS=512,1024 (say) instead, those
token counts for every model and mode, without `host`: at such sizes the
GPU's work is short and `eager_nosync` is the host's pace.  Also a few BF16 GEMMs of the H100 kernel
table's shapes, so a run on another GPU can be set against that table.

Writes $OUT/moe.csv: case,model,hidden,ffn,experts,topk,local,tokens,mode,
how,seconds,launches.  Stdlib + torch.
"""
import csv, os, sys, time

import torch
import torch.nn.functional as F

OUT = os.environ.get('OUT', './out')
os.makedirs(OUT, exist_ok=True)
dev = torch.device('cuda')
DT = torch.bfloat16
F8 = torch.float8_e4m3fn
F8MAX = torch.finfo(F8).max
rows = []
out_path = os.path.join(OUT, 'moe.csv')
HEADER = ['case', 'model', 'hidden', 'ffn', 'experts', 'topk', 'local', 'tokens', 'mode',
          'how', 'seconds', 'launches']


def flush():
    with open(out_path, 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        w.writerows(rows)


def median(ts):
    ts = sorted(ts)
    return ts[len(ts) // 2]


def quantize(x):
    """Per-tensor current scaling: amax, scale, cast; returns (q, inverse scale)."""
    amax = x.abs().amax().float().clamp(min=1e-12)
    q = (x.float() * (F8MAX / amax)).to(F8)
    return q, (amax / F8MAX)


class Experts(torch.autograd.Function):
    """fc1 (or fc2) of every local expert: y_i = x_i w_i^T, rows split by `splits`."""

    @staticmethod
    def forward(ctx, x, w, splits, mode):
        ctx.splits, ctx.mode = splits, mode
        n = w.shape[1]
        xs = torch.split(x, splits)
        if mode == 'bf16_loop':
            y = torch.empty(x.shape[0], n, device=x.device, dtype=DT)
            ys = torch.split(y, splits)
            for i, xi in enumerate(xs):
                torch.mm(xi, w[i].t(), out=ys[i])
            ctx.save_for_backward(x, w)
            return y
        # fp8_loop: weights quantised once (cached, as TE does from the first
        # micro-batch on), inputs per expert with their transposed copy
        wq, ws, wqt = ctx_weights(w)
        outs, saved = [], []
        for i, xi in enumerate(xs):
            q, s = quantize(xi)
            qt = q.t().contiguous()
            outs.append(torch._scaled_mm(q, wq[i].t(), scale_a=s, scale_b=ws[i], out_dtype=DT))
            saved.append((qt, s))
        ctx.fp8 = (saved, wq, ws, wqt)
        return torch.cat(outs)

    @staticmethod
    def backward(ctx, dy):
        splits, mode = ctx.splits, ctx.mode
        dys = torch.split(dy, splits)
        if mode == 'bf16_loop':
            x, w = ctx.saved_tensors
            xs = torch.split(x, splits)
            dx = torch.empty_like(x)
            dxs = torch.split(dx, splits)
            dw = torch.empty_like(w)
            for i, g in enumerate(dys):
                torch.mm(g, w[i], out=dxs[i])
                torch.mm(g.t(), xs[i], out=dw[i])
            return dx, dw, None, None
        saved, wq, ws, wqt = ctx.fp8
        dxs, dw = [], torch.empty(len(splits), *wq.shape[1:], device=dy.device, dtype=DT)
        for i, g in enumerate(dys):
            q, s = quantize(g)
            gqt = q.t().contiguous()
            dxs.append(torch._scaled_mm(q, wqt[i].t(), scale_a=s, scale_b=ws[i], out_dtype=DT))
            xqt, xs_ = saved[i]
            dw[i] = torch._scaled_mm(gqt, xqt.t(), scale_a=s, scale_b=xs_, out_dtype=DT)
        return torch.cat(dxs), dw, None, None


def experts(x, w, layer):
    """The local experts' GEMMs of one linear layer, in the layer's mode."""
    if layer.mode == 'bf16_grouped':	# torchtitan's call (its moe.py)
        return torch._grouped_mm(x, w.transpose(-2, -1), offs=layer.offs)
    if layer.mode == 'dense':
        return x @ w[0].t()
    return Experts.apply(x, w, layer.splits, layer.mode)


_wcache = {}


def ctx_weights(w):
    key = (w.data_ptr(), tuple(w.shape))
    if key not in _wcache:
        qs = [quantize(w[i]) for i in range(w.shape[0])]
        wq = torch.stack([q for q, _ in qs])
        wqt = torch.stack([q.t().contiguous() for q, _ in qs])
        _wcache[key] = (wq, [s for _, s in qs], wqt)
    return _wcache[key]


class Layer:
    """One EP rank's MoE block: router and permutation over T tokens, the local
    experts over T x topk copies."""

    def __init__(self, h, f, E, k, local, T, mode):
        self.h, self.f, self.E, self.k, self.local, self.T, self.mode = h, f, E, k, local, T, mode
        g = torch.Generator(device='cuda').manual_seed(0)
        self.x = torch.randn(T, h, device=dev, dtype=DT, generator=g, requires_grad=True)
        self.wr = (torch.randn(E, h, device=dev, dtype=DT, generator=g) * h ** -0.5).requires_grad_()
        ne = 1 if mode == 'dense' else local
        self.w1 = (torch.randn(ne, 2 * f, h, device=dev, dtype=DT, generator=g) * h ** -0.5
                   ).requires_grad_()
        self.w2 = (torch.randn(ne, h, f, device=dev, dtype=DT, generator=g) * f ** -0.5
                   ).requires_grad_()
        R = T * k
        per = R // local
        self.splits = [per] * (local - 1) + [R - per * (local - 1)]
        self.offs = torch.tensor(self.splits, device=dev, dtype=torch.int32).cumsum(
            0, dtype=torch.int32)
        self.gy = torch.randn(T, h, device=dev, dtype=DT, generator=g)

    def step(self, sync=True):
        x = self.x
        logits = (x @ self.wr.t()).float()
        probs = torch.softmax(logits, dim=-1)
        top_p, top_e = torch.topk(probs, self.k, dim=-1)
        # forced balance (the runs' moe_router_force_load_balancing): the
        # copies' expert ids are spread evenly, the probabilities kept
        ids = torch.arange(self.T * self.k, device=dev) % self.E
        order = torch.argsort(ids + 0 * top_e.flatten(), stable=True)
        if sync:	# the dispatcher's splits for all_to_all_single, on the host
            torch.bincount(ids, minlength=self.E).tolist()
        tok = order // self.k
        xp = x.index_select(0, tok)	# permute: the copies in expert order
        # (the exchange would run here; this rank's local experts receive
        # T x topk copies from the EP group under balanced routing)
        a = experts(xp, self.w1, self)
        g1, u = a.chunk(2, dim=-1)
        a = F.silu(g1) * u
        y = experts(a, self.w2, self)
        y = y * top_p.flatten().index_select(0, order).unsqueeze(-1).to(DT)
        out = torch.zeros_like(x).index_add(0, tok, y)	# unpermute
        out.backward(self.gy)
        for p in (self.x, self.wr, self.w1, self.w2):
            p.grad = None


def gpu_seconds(layer, reps=10):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            layer.step(sync=False)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer.step(sync=False)
    graph.replay()
    torch.cuda.synchronize()
    b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        b.record(); graph.replay(); e.record(); torch.cuda.synchronize()
        ts.append(b.elapsed_time(e) / 1e3)
    del graph
    return median(ts)


def eager_seconds(layer, reps=10, sync=True):
    for _ in range(3):
        layer.step(sync)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        layer.step(sync)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    return median(ts)


_busy = None


def host_seconds(layer, reps=7):
    """CPU time to issue one forward + backward without the sync, the GPU busy
    with a long GEMM chain queued ahead so nothing waits on it."""
    global _busy
    if _busy is None:
        _busy = torch.randn(8192, 8192, device=dev, dtype=DT)
    for _ in range(2):
        layer.step(sync=False)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        for _ in range(60):	# ~60 x 1.4 ms of GPU work ahead
            torch.mm(_busy, _busy)
        t = time.perf_counter()
        layer.step(sync=False)
        ts.append(time.perf_counter() - t)
        torch.cuda.synchronize()
    return median(ts)


def launches(layer):
    from torch.profiler import profile, ProfilerActivity
    layer.step(sync=False)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        layer.step(sync=False)
        torch.cuda.synchronize()
    names = ('cudaLaunchKernel', 'cuLaunchKernel', 'cudaLaunchKernelExC', 'cuLaunchKernelEx',
             'cudaLaunchCooperativeKernel')
    return sum(1 for ev in prof.events() if ev.name in names)


MODELS = [	# name, hidden, expert ffn, experts, topk (their HF configs)
    ('qwen3-30b-a3b', 2048, 768, 128, 8),
    ('qwen3-235b-a22b', 4096, 1536, 128, 8),
    ('gpt-oss-120b', 2880, 2880, 128, 4),
    ('deepseek-v3', 7168, 2048, 256, 8),
]
PLAN = [	# model, local experts (EP 8 unless said), micro-batch sizes, modes
    ('qwen3-30b-a3b', 16, (1, 2, 4, 8), ('bf16_loop', 'bf16_grouped', 'fp8_loop', 'dense')),
    ('qwen3-235b-a22b', 16, (1, 2), ('bf16_loop', 'bf16_grouped', 'fp8_loop', 'dense')),
    ('gpt-oss-120b', 16, (1, 4), ('bf16_loop', 'bf16_grouped', 'dense')),
    ('gpt-oss-120b', 2, (4,), ('bf16_loop', 'bf16_grouped', 'dense')),	# EP 64
    ('deepseek-v3', 32, (1,), ('bf16_loop', 'bf16_grouped', 'fp8_loop', 'dense')),
]
SEQ = 4096


def gemm_baseline():
    """A few kernel-table shapes (BF16 torch.mm), to set this GPU against it."""
    b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for m, n, k in ((8192, 8192, 8192), (4096, 6144, 4096), (4096, 4096, 14336),
                    (2048, 1536, 2048), (2048, 2048, 768)):
        a = torch.randn(m, k, device=dev, dtype=DT)
        w = torch.randn(k, n, device=dev, dtype=DT)
        for _ in range(5):
            torch.mm(a, w)
        ts = []
        for _ in range(20):
            b.record(); torch.mm(a, w); e.record(); torch.cuda.synchronize()
            ts.append(b.elapsed_time(e) / 1e3)
        rows.append(('gemm_%dx%dx%d' % (m, n, k), '', m, n, k, 0, 0, 0, 'bf16', 'gpu',
                     '%.6e' % median(ts), 1))


def main():
    t0 = time.time()
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    gemm_baseline()
    flush()
    models = {m[0]: m[1:] for m in MODELS}
    only = os.environ.get('ONLY')
    tokens = os.environ.get('TOKENS')	# launch-bound sizes: the host's pace
    for name, local, mbss, modes in PLAN:
        h, f, E, k = models[name]
        for T in ([int(t) for t in tokens.split(',')] if tokens else [b * SEQ for b in mbss]):
            for mode in modes:
                if only and only not in (name, mode):
                    continue
                case = '%s_l%d_t%d_%s' % (name, local, T, mode)
                try:
                    layer = Layer(h, f, E, k, local, T, mode)
                    n = launches(layer)
                    for how, fn in (('gpu', gpu_seconds), ('eager', eager_seconds),
                                    ('eager_nosync', lambda l: eager_seconds(l, sync=False)),
                                    ('host', host_seconds)):
                        if tokens and how == 'host':
                            continue
                        sec = fn(layer)
                        rows.append((case, name, h, f, E, k, local, T, mode, how,
                                     '%.6e' % sec, n))
                        print(case, how, '%.3f ms' % (sec * 1e3), n, flush=True)
                    del layer
                    _wcache.clear()
                    torch.cuda.empty_cache()
                except Exception as ex:	# a shape or op this torch refuses
                    print(case, 'failed:', repr(ex)[:300], flush=True)
                flush()
    print('done in %.0f s' % (time.time() - t0), flush=True)


if __name__ == '__main__':
    main()
