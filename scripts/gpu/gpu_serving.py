"""Measure issue #29's serving workloads on a CUDA GPU: varlen prefill, a sliding window and a
paged decode batch, with FlexAttention block masks and SDPA (nested jagged tensors, gathered
pages).

Usage (on a machine with CUDA and PyTorch ≥ 2.5):
    python scripts/gpu/gpu_serving.py -o data/gpu/h200-serving.json [--deadline-s 420] [--quick]

The traces are those of scripts/gpu/serving_traces.py (seeded; the schedule generator's
benchmarks draw the same lengths). Every measurement: warm-up (and compilation), then CUDA
events around repeated calls, median reported; one that cannot run records its error instead.
The JSON holds the provenance (GPU, driver, torch, CUDA, date), the traces and one entry per
(workload, backend, heads) with its time, useful FLOPs and the K/V bytes the workload must
touch. bf16, d = 128 throughout.

Exits 1 with one line when CUDA is not available.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_traces as traces  # noqa: E402
from gpu_common import cuda_torch, parser, time_calls  # noqa: E402

D = 128


def main() -> int:
    ap = parser(__doc__, "small traces", 420.0)
    ap.add_argument("--only", default=None,
                    help="comma-separated backends to measure (default: all)")
    ap.add_argument("--prefill-lengths", default=None, metavar="L,L,…|@FILE",
                    help="your prompts' lengths (default: the seeded log-normal trace)")
    ap.add_argument("--cache-lengths", default=None, metavar="L,L,…|@FILE",
                    help="your decode batch's cache lengths (default: the seeded uniform trace)")
    a = ap.parse_args()
    torch = cuda_torch("gpu_serving")
    if torch is None:
        return 1
    t0 = time.perf_counter()
    props = torch.cuda.get_device_properties(0)
    prov = {"gpu": props.name, "sm_count": props.multi_processor_count,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "timing": "CUDA events around repeated calls after warm-up; median per call",
            "script": "scripts/gpu/gpu_serving.py" + (" --quick" if a.quick else "")}
    prefill = (traces.read_lengths(a.prefill_lengths) if a.prefill_lengths
               else traces.prefill_lengths(cap=1 << 17))
    decode = (traces.read_lengths(a.cache_lengths) if a.cache_lengths
              else traces.decode_cache_lengths())
    win = dict(traces.WINDOW)
    if a.quick:
        prefill, decode, win = prefill[:8], [n // 8 for n in decode[:16]], {"n": 8192,
                                                                           "window": 1024}
    result = {"provenance": prov, "d": D, "dtype": "bf16",
              "traces": {"prefill_lengths": prefill, "decode_cache_lengths": decode,
                         "decode": traces.DECODE, "window": win},
              "measurements": []}
    out = Path(a.output)

    def record(entry):
        result["measurements"].append(entry)
        out.write_text(json.dumps(result, indent=1))
        status = entry.get("status")
        took = f"{entry['time_ms']:.3f} ms" if status == "ok" else status
        print(f"[{time.perf_counter() - t0:5.0f}s] {entry['workload']:8s} "
              f"{entry['backend']:22s} heads={entry['heads']:<3d} {took}", flush=True)

    jobs = []
    for heads in (1, 32):
        jobs += [("prefill", b, heads) for b in ("flex-document", "sdpa-nested-jagged",
                                                 "sdpa-one-by-one")]
        jobs += [("window", b, heads) for b in ("flex-sliding-window", "sdpa-dense-causal")]
    jobs += [("decode", b, traces.DECODE["heads"]) for b in
             ("flex-contiguous", "flex-contiguous-prefill-kernel", "sdpa-gathered-pages",
              "sdpa-gathered-attention-only", "flex-paged")]
    if a.only:
        jobs = [j for j in jobs if j[1] in a.only.split(",")]
    for workload, backend, heads in jobs:
        entry = {"workload": workload, "backend": backend, "heads": heads}
        if time.perf_counter() - t0 > a.deadline_s:
            record({**entry, "status": "skipped-deadline"})
            continue
        try:
            fn, info = BUILDERS[workload](torch, backend, heads, prefill, decode, win)
            ms, ms_min, reps = time_calls(torch, fn, warmup=3, budget_ms=400, most=30)
            record({**entry, **info, "status": "ok", "time_ms": ms, "time_ms_min": ms_min,
                    "repeats": reps, "tflops": info["flops"] / (ms * 1e-3) / 1e12})
        except Exception as e:  # an unsupported path or out of memory: recorded, not fatal
            msg = str(e)
            msg = msg if len(msg) < 1200 else msg[:300] + " … " + msg[-900:]
            record({**entry, "status": f"error-{type(e).__name__}: {msg}"})
        finally:
            fn = None
            torch.cuda.empty_cache()
    print(f"wrote {out}: {len(result['measurements'])} entries", flush=True)
    return 0


def _flex(torch):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def block_mask(*args, **kw):   # compiled: a 128K × 128K mask is never materialized
        return create_block_mask(*args, _compile=True, **kw)

    return torch.compile(flex_attention, dynamic=False), block_mask


def _causal_flops(lens, heads):
    """Useful FLOPs of causal attention over sequences of these lengths (4·d per pair)."""
    return sum(4.0 * D * heads * n * (n + 1) / 2 for n in lens)


def _prefill(torch, backend, heads, lens, _decode, _win):
    import torch.nn.functional as F

    total = sum(lens)
    dev, dt_ = "cuda", torch.bfloat16
    info = {"tokens": total, "sequences": len(lens), "flops": _causal_flops(lens, heads)}
    if backend == "flex-document":
        flex, cbm = _flex(torch)
        doc = torch.repeat_interleave(torch.arange(len(lens), device=dev),
                                      torch.tensor(lens, device=dev))
        pad = (-total) % 128
        doc = torch.cat([doc, torch.full((pad,), -1, device=dev, dtype=doc.dtype)])
        q, k, v = (torch.randn(1, heads, total + pad, D, device=dev, dtype=dt_)
                   for _ in range(3))

        def mask(b, h, qi, ki):
            return (doc[qi] == doc[ki]) & (qi >= ki)

        bm = cbm(mask, None, None, total + pad, total + pad, device=dev)
        return (lambda: flex(q, k, v, block_mask=bm)), info
    if backend == "sdpa-nested-jagged":
        offsets = torch.tensor([0] + list(_cumsum(lens)), device=dev, dtype=torch.int64)
        q, k, v = (torch.nested.nested_tensor_from_jagged(
            torch.randn(total, heads, D, device=dev, dtype=dt_), offsets).transpose(1, 2)
            for _ in range(3))
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)), info
    qs = [torch.randn(1, heads, n, D, device=dev, dtype=dt_) for n in lens]

    def one_by_one():
        for x in qs:
            F.scaled_dot_product_attention(x, x, x, is_causal=True)
    return one_by_one, info


def _window(torch, backend, heads, _prefill_lens, _decode, win):
    import torch.nn.functional as F

    n, w = win["n"], win["window"]
    dev, dt_ = "cuda", torch.bfloat16
    pairs = sum(min(i, w) + 1 for i in range(n))
    info = {"n": n, "window": w, "flops": 4.0 * D * heads * pairs}
    q, k, v = (torch.randn(1, heads, n, D, device=dev, dtype=dt_) for _ in range(3))
    if backend == "flex-sliding-window":
        flex, cbm = _flex(torch)

        def mask(b, h, qi, ki):
            return (qi >= ki) & (qi - ki <= w)

        bm = cbm(mask, None, None, n, n, device=dev)
        return (lambda: flex(q, k, v, block_mask=bm)), info
    return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)), {
        **info, "note": "dense causal (no window): what SDPA without a mask mod computes"}


FLEX_CHUNK = 32   # FlexAttention's kernels fail to compile on K/V of ≥ 2^31 elements
                  # (int64 offsets, torch 2.11): the flex decodes run 32 sequences a call


def _decode(torch, backend, heads, _prefill_lens, lens, _win):
    p = traces.DECODE
    hk, page = p["kv_heads"], p["page_size"]
    info = {"sequences": len(lens), "kv_heads": hk, "page_size": page,
            "cache_tokens": sum(lens), "flops": 4.0 * D * heads * sum(lens),
            "kv_bytes_touched": 2 * 2 * D * hk * sum(-(-n // page) * page for n in lens)}
    if not backend.startswith("flex"):
        return _decode_part(torch, backend, heads, lens), info
    parts = [_decode_part(torch, backend, heads, lens[i:i + FLEX_CHUNK])
             for i in range(0, len(lens), FLEX_CHUNK)]
    note = f"{len(parts)} calls of {FLEX_CHUNK} sequences"
    if backend == "flex-paged":
        note += "; PagedAttention's pages are the block mask's 128 keys, not 16"
    return (lambda: [f() for f in parts]), {**info, "note": note}


def _decode_part(torch, backend, heads, lens):
    import torch.nn.functional as F

    dev, dt_ = "cuda", torch.bfloat16
    p = traces.DECODE
    hk, page, b = p["kv_heads"], p["page_size"], len(lens)
    lmax = -(-max(lens) // page) * page
    lens_t = torch.tensor(lens, device=dev)
    q = torch.randn(b, heads, 1, D, device=dev, dtype=dt_)
    if backend.startswith("flex-contiguous"):
        flex, cbm = _flex(torch)
        k, v = (torch.randn(b, hk, lmax, D, device=dev, dtype=dt_) for _ in range(2))

        def mask(bi, h, qi, ki):
            return ki < lens_t[bi]

        bm = cbm(mask, b, None, 1, lmax, device=dev)
        opts = ({"FORCE_USE_FLEX_ATTENTION": True} if backend.endswith("prefill-kernel")
                else None)
        return lambda: flex(q, k, v, block_mask=bm, enable_gqa=True, kernel_options=opts)
    pages = [-(-n // page) for n in lens]
    n_pages = sum(pages)
    perm = torch.randperm(n_pages, device=dev)  # pages anywhere in the pool
    table = torch.zeros(b, lmax // page, dtype=torch.int64, device=dev)
    at = 0
    for i, np_ in enumerate(pages):
        table[i, :np_] = perm[at:at + np_]
        at += np_
    if backend == "flex-paged":
        return _flex_paged(torch, q, lens, n_pages, page, hk)
    kc, vc = (torch.randn(n_pages, page, hk, D, device=dev, dtype=dt_) for _ in range(2))
    keep = (torch.arange(lmax, device=dev)[None, :] < lens_t[:, None])[:, None, None, :]

    def gather(c):
        return c[table].reshape(b, lmax, hk, D).transpose(1, 2)

    if backend == "sdpa-gathered-attention-only":
        k, v = gather(kc), gather(vc)
        return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)

    def gathered():
        return F.scaled_dot_product_attention(q, gather(kc), gather(vc), attn_mask=keep,
                                              enable_gqa=True)
    return gathered


def _flex_paged(torch, q, lens, n_pages, page, hk):
    """FlexAttention over a paged cache (torch's experimental PagedAttention): the logical
    block mask converted through the page table."""
    from torch.nn.attention.experimental._paged_attention import PagedAttention

    flex, cbm = _flex(torch)
    dev, dt_ = "cuda", torch.bfloat16
    b = len(lens)
    kvb = 128  # the block mask's KV block size; PagedAttention wants pages of that size
    lmax = -(-max(lens) // kvb) * kvb
    pa = PagedAttention(n_pages * page // kvb + b, kvb, b, device=dev)
    kc, vc = (torch.zeros(1, hk, pa.n_pages * kvb, D, device=dev, dtype=dt_) for _ in range(2))
    for i, n in enumerate(lens):
        pa.reserve(torch.tensor(i, device=dev), torch.tensor(n, device=dev))
    lens_t = torch.tensor(lens, device=dev)

    def mask(bi, h, qi, ki):
        return ki < lens_t[bi]

    logical = cbm(mask, b, None, 1, lmax, device=dev, BLOCK_SIZE=kvb)
    physical = pa.convert_logical_block_mask(logical)
    # PagedAttention wants pages of the block mask's 128 keys, not 16
    return lambda: flex(q, kc, vc, block_mask=physical, enable_gqa=True)


def _cumsum(xs):
    s = 0
    for x in xs:
        s += x
        yield s


BUILDERS = {"prefill": _prefill, "window": _window, "decode": _decode}


if __name__ == "__main__":
    sys.exit(main())
