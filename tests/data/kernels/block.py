#!/usr/bin/env python3
"""One Llama transformer block as torchtitan runs it, timed on one GPU.

The block is written the way torchtitan's Llama 3 model writes it (its
torchtitan/models/llama3/model.py at v0.2.2: RMSNorm as square, mean,
rsqrt and products; complex RoPE through view_as_complex; KV heads
repeated before SDPA; SwiGLU as w2(silu(w1 x) * w3 x)), in BF16 (FSDP2's
mixed-precision compute dtype), for a micro-batch of B sequences of S
tokens, forward + backward:

- `none`: no activation checkpointing;
- `sac_op`: torchtitan's per-op selective checkpointing (the policy of its
  distributed/activation_checkpoint.py: keep the outputs of mm, SDPA and
  max, except every second mm of the block, counted separately in forward
  and recompute);
- `full`: the whole block recomputed;
- the same three under torch.compile of the block (torchtitan compiles
  each block), when it compiles;
- `launch`: the same block at B=1, S=128 (launch-bound: the CPU cost of a
  block's kernels), eager and compiled;
- `head`: final RMSNorm, output projection and eager fp32 cross entropy
  (torchtitan's loss) forward + backward, for B x S tokens.
With PART=launch instead: the 8B block at TP 8's per-rank widths (4 query
heads, 1 KV head, ffn 1792) from 128 to 8192 tokens, each checkpointing
mode, eager and compiled (`tp8_s<S>_<mode>[_compiled]`): where the time
stops falling with the tokens, the host sets the pace.

Writes $OUT/block.csv: case,dim,ffn,heads,kv_heads,batch,seq,seconds,peak_bytes
with the median of CUDA-event timings after warm-up, and the peak memory
above the block's inputs and parameters.  Stdlib + torch.
"""
import csv, functools, os, time

import torch
import torch.nn.functional as F

OUT = os.environ.get('OUT', './out')
os.makedirs(OUT, exist_ok=True)
dev = torch.device('cuda')
rows = []
DT = torch.bfloat16
HEAD_DIM = 128	# Llama 3's


def timed(fn, reps=7):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def rmsnorm(x, w, eps=1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * w


def rope(x, fc):
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * fc).flatten(3).type_as(x)


class Block(torch.nn.Module):
    def __init__(self, dim, ffn, heads, kv):
        super().__init__()
        hd = HEAD_DIM
        self.heads, self.kv, self.hd = heads, kv, hd
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False, device=dev, dtype=DT)
        self.wq, self.wk, self.wv = lin(dim, heads * hd), lin(dim, kv * hd), lin(dim, kv * hd)
        self.wo = lin(heads * hd, dim)
        self.w1, self.w3, self.w2 = lin(dim, ffn), lin(dim, ffn), lin(ffn, dim)
        self.n1 = torch.nn.Parameter(torch.ones(dim, device=dev, dtype=DT))
        self.n2 = torch.nn.Parameter(torch.ones(dim, device=dev, dtype=DT))

    def forward(self, x, fc):
        b, s, _ = x.shape
        h = rmsnorm(x, self.n1)
        q = self.wq(h).view(b, s, self.heads, self.hd)
        k = self.wk(h).view(b, s, self.kv, self.hd)
        v = self.wv(h).view(b, s, self.kv, self.hd)
        q, k = rope(q, fc), rope(k, fc)
        r = self.heads // self.kv
        k = k[:, :, :, None, :].expand(b, s, self.kv, r, self.hd).reshape(b, s, self.heads, self.hd)
        v = v[:, :, :, None, :].expand(b, s, self.kv, r, self.hd).reshape(b, s, self.heads, self.hd)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))
        h = rmsnorm(x, self.n2)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def sac_context():
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    save = {torch.ops.aten.mm.default, torch.ops.aten.max.default,
            torch.ops.aten._scaled_dot_product_flash_attention.default,
            torch.ops.aten._scaled_dot_product_efficient_attention.default}
    for name in ('_scaled_dot_product_cudnn_attention',):
        op = getattr(torch.ops.aten, name, None)
        if op is not None:
            save.add(op.default)
    meta = {'forward': 0, 'recompute': 0}

    def policy(ctx, func, *args, **kwargs):
        mode = 'recompute' if ctx.is_recompute else 'forward'
        if func == torch.ops.aten.mm.default:
            meta[mode] += 1
        keep = func in save and not (func == torch.ops.aten.mm.default and meta[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
    return create_selective_checkpoint_contexts(policy)


def wrapped(block, mode):
    from torch.utils.checkpoint import checkpoint
    if mode == 'none':
        return block
    if mode == 'full':
        return lambda x, fc: checkpoint(block, x, fc, use_reentrant=False)
    return lambda x, fc: checkpoint(block, x, fc, use_reentrant=False, context_fn=sac_context)


def freqs(s, hd):
    inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device=dev).float() / hd))
    ang = torch.outer(torch.arange(s, device=dev).float(), inv)
    return torch.polar(torch.ones_like(ang), ang)[None, :, None, :]


def block_case(tag, dim, ffn, heads, kv, b, s, modes=('none', 'sac_op', 'full'), compile_=False):
    blk = Block(dim, ffn, heads, kv)
    fc = freqs(s, HEAD_DIM)
    x = torch.randn(b, s, dim, device=dev, dtype=DT, requires_grad=True)
    g = torch.randn_like(x)
    for mode in modes:
        f = wrapped(blk, mode)
        if compile_:
            f = torch.compile(f)

        def step():
            y = f(x, fc)
            y.backward(g)
            x.grad = None
            for p in blk.parameters():
                p.grad = None
        try:
            sec = timed(step)
            torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step(); torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            name = '%s_%s%s' % (tag, mode, '_compiled' if compile_ else '')
            rows.append((name, dim, ffn, heads, kv, b, s, sec, peak))
            print(*rows[-1], flush=True)
        except Exception as ex:
            print(tag, mode, 'compiled' if compile_ else 'eager', 'failed:', str(ex)[:160], flush=True)
    del blk, x, g


def head_case(dim, vocab, b, s):
    w = torch.nn.Parameter(torch.randn(vocab, dim, device=dev, dtype=DT) * 0.02)
    n = torch.nn.Parameter(torch.ones(dim, device=dev, dtype=DT))
    x = torch.randn(b, s, dim, device=dev, dtype=DT, requires_grad=True)
    tgt = torch.randint(0, vocab, (b * s,), device=dev)

    def step():
        logits = F.linear(rmsnorm(x, n), w)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tgt)
        loss.backward()
        x.grad = None; w.grad = None; n.grad = None
    sec = timed(step)
    rows.append(('head', dim, vocab, 0, 0, b, s, sec, 0))
    print(*rows[-1], flush=True)
    del w, x


def save():
    with open(os.path.join(OUT, 'block.csv'), 'w', newline='') as f:
        wr = csv.writer(f)
        wr.writerow(['case', 'dim', 'ffn', 'heads', 'kv_heads', 'batch', 'seq', 'seconds', 'peak_bytes'])
        for r in rows:
            wr.writerow(r)


t0 = time.time()
print('torch', torch.__version__, torch.cuda.get_device_name(), flush=True)
PART = os.environ.get('PART', 'shapes')
if PART == 'shapes':
    # Llama 3 8B and 70B (one TP-1 block) at torchtitan's published shapes
    # (local batch 2 x 8192; 1 x 8192) and a shorter sequence
    block_case('8b_b2', 4096, 14336, 32, 8, 2, 8192)
    block_case('8b_b1', 4096, 14336, 32, 8, 1, 8192)
    block_case('8b_b1s4k', 4096, 14336, 32, 8, 1, 4096)
    block_case('70b_b1', 8192, 28672, 64, 8, 1, 8192, modes=('none', 'sac_op'))
    block_case('launch', 4096, 14336, 32, 8, 1, 128, modes=('none',))
    head_case(4096, 128256, 2, 8192)
    save()
    block_case('launch', 4096, 14336, 32, 8, 1, 128, modes=('none',), compile_=True)
    block_case('8b_b2', 4096, 14336, 32, 8, 2, 8192, modes=('none', 'sac_op'), compile_=True)
else:
    # PART=launch: where the CPU sets the pace.  The 8B block at TP 8's
    # per-rank widths (4 query heads, 1 KV head, ffn 1792) over sequences
    # from launch-bound to GPU-bound, each checkpointing mode, eager and
    # compiled: the time stops falling with the tokens at the CPU's cost.
    for s in (128, 1024, 2048, 4096, 8192):
        block_case('tp8_s%d' % s, 4096, 1792, 4, 1, 1, s)
    for s in (128, 2048, 8192):
        block_case('tp8_s%d' % s, 4096, 1792, 4, 1, 1, s, compile_=True)
save()
print('done in %.0f s' % (time.time() - t0), flush=True)
