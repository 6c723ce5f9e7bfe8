# Times transformer layers on this GPU (PyTorch, torch.compile, BF16) to
# check pipette's per-layer compute prediction; prints one JSON line per
# shape (tests/validate/gpu/README.md).  Run by hand on a GPU machine:
#   python3 layers.py > layers-GPU.jsonl
#   python3 layers.py --long > layers-GPU-long.jsonl   (16K and 32K tokens)
# Not part of the build.
import json, sys, torch, torch.nn as nn, torch.nn.functional as F

class Layer(nn.Module):
    def __init__(s, h, nq, nkv, ffn, swiglu, d=128):
        super().__init__()
        s.nq, s.nkv, s.d, s.swiglu = nq, nkv, d, swiglu
        s.n1 = nn.RMSNorm(h) if swiglu else nn.LayerNorm(h)
        s.qkv = nn.Linear(h, (nq + 2 * nkv) * d, bias=not swiglu)
        s.o = nn.Linear(nq * d, h, bias=not swiglu)
        s.n2 = nn.RMSNorm(h) if swiglu else nn.LayerNorm(h)
        s.fc1 = nn.Linear(h, (2 if swiglu else 1) * ffn, bias=not swiglu)
        s.fc2 = nn.Linear(ffn, h, bias=not swiglu)
    def forward(s, x):
        b, t, h = x.shape
        q, k, v = s.qkv(s.n1(x)).split([s.nq * s.d, s.nkv * s.d, s.nkv * s.d], -1)
        q = q.view(b, t, s.nq, s.d).transpose(1, 2)
        k = k.view(b, t, s.nkv, s.d).transpose(1, 2)
        v = v.view(b, t, s.nkv, s.d).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=s.nkv != s.nq)
        x = x + s.o(a.transpose(1, 2).reshape(b, t, s.nq * s.d))
        y = s.fc1(s.n2(x))
        if s.swiglu:
            g, u = y.chunk(2, -1)
            y = F.silu(g) * u
        else:
            y = F.gelu(y, approximate="tanh")
        return x + s.fc2(y)

def bench(name, h, nq, nkv, ffn, swiglu, seq, mb, nl=4, d=128):
    torch._dynamo.reset()    # each shape compiles afresh (no recompile limit)
    torch.manual_seed(0)
    layers = nn.Sequential(*[Layer(h, nq, nkv, ffn, swiglu, d) for _ in range(nl)]).cuda().bfloat16()
    f = torch.compile(layers)
    x = torch.randn(mb, seq, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    def fwd():
        with torch.no_grad():
            f(x)
    def fwdbwd():
        y = f(x); y.backward(torch.ones_like(y))
    out = {"name": name, "hidden": h, "q_heads": nq, "kv_heads": nkv, "ffn": ffn,
           "swiglu": swiglu, "seq": seq, "micro_batch": mb, "layers_timed": nl}
    for what, fn in (("fwd", fwd), ("fwd_bwd", fwdbwd)):
        for _ in range(3): fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(7):
            a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
            a.record(); fn(); b.record(); torch.cuda.synchronize()
            ts.append(a.elapsed_time(b) / nl)
        ts.sort()
        out[what + "_ms_per_layer"] = ts[len(ts) // 2]
    print(json.dumps(out), flush=True)

print(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
if "--long" in sys.argv:
    # Long sequences, where the attention core dominates: Llama-3-8B and
    # Llama-3-70B at TP 8, one sequence of 16K and 32K tokens.
    for seq in (16384, 32768):
        bench("llama3-8b tp1 s%dk" % (seq // 1024), 4096, 32, 8, 14336, True, seq, 1, nl=2)
        bench("llama3-70b tp8 s%dk" % (seq // 1024), 8192, 8, 1, 3584, True, seq, 1, nl=2)
    sys.exit(0)
# llama3-8b (Meta config: hidden 4096, 32/8 heads, FFN 14336), one GPU
bench("llama3-8b tp1", 4096, 32, 8, 14336, True, 4096, 1)
# llama3-70b (hidden 8192, 64/8 heads, FFN 28672) sharded TP=8: per-GPU shapes
bench("llama3-70b tp8", 8192, 8, 1, 3584, True, 4096, 1)
# llama3-70b sharded TP=4
bench("llama3-70b tp4", 8192, 16, 2, 7168, True, 4096, 1)
# GPT-3 175B (hidden 12288, 96 heads, GELU 4h) sharded TP=8, seq 2048
bench("gpt3-175b tp8", 12288, 12, 12, 6144, False, 2048, 1)
# 2 sequences per micro-batch, llama3-8b, seq 2048
bench("llama3-8b tp1 mb2 s2048", 4096, 32, 8, 14336, True, 2048, 2)
