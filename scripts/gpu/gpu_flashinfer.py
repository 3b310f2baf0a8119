"""Measure FlashInfer's attention kernels on a CUDA GPU: the strongest baselines a server runs.

Usage (on a machine with CUDA, PyTorch and flashinfer-python 0.5.x):
    python scripts/gpu/gpu_flashinfer.py -o DIR --part dense   [--deadline-s 500] [--quick]
    python scripts/gpu/gpu_flashinfer.py -o DIR --part serving [--deadline-s 500] [--quick]

``dense`` writes DIR/flashinfer-dense.csv in scripts/gpu/gpu_baseline.py's columns (so that
``attenio compare`` picks the fastest of SDPA's and FlashInfer's backends per shape):
``single_prefill_with_kv_cache`` with its fa2 and fa3 backends, bf16, d 64 and 128, N 1K–128K,
causal and not, one head and a filled shape (about 2M query rows).

``serving`` writes DIR/flashinfer-serving.json in scripts/gpu/gpu_serving.py's schema: the
serving traces of scripts/gpu/serving_traces.py (varlen prefill through the ragged wrapper,
the 128K sliding window, the 256-sequence paged decode with bf16 and FP8 K/V, CUDA-core and
tensor-core decode and the fa3 paged prefill kernel), the two shared-prefix decode traces
(plain paged decode over the shared tables, the cascade wrapper, and the same lengths on
unshared pages) and the variant layers FlashInfer has kernels for (Gemma 2's soft cap, ALiBi,
gpt-oss's sinks, DeepSeek's MLA absorbed decode), each beside the same shape without the
variant.

Both parts also measure the GPU's practical limits in the same run: a plain HBM read of 4 GiB
and an 8192³ bf16 GEMM. Kernels compile on first use (JIT). The fa3 ones take 2 to 8 minutes
each on the lent H200, so the script compiles every kernel of the run first, on
``--compile-threads`` threads of this process (each runs ninja; FlashInfer's per-module locks
keep them apart, and the modules they load stay cached for the timing), until
``--compile-deadline-s``; builds still running then are stopped (ninja keeps the objects it
finished, so a later run on the same machine goes on from there) and their jobs are recorded as
not compiled. Only then is anything timed (CUDA events around repeated calls after warm-up,
median), with no compiler running beside it. ``--only`` takes workloads in the order that
matters (they are compiled and timed in that order); ``--resume FILE`` keeps the measured rows
of an earlier serving JSON and runs only the rest. A job that cannot run records its error.

Exits 1 with one line when CUDA or FlashInfer is not available.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_traces as traces  # noqa: E402
from gpu_common import cuda_torch, gemm_rate, nvml, parser, read_ceiling, sm_clock, time_calls  # noqa: E402

COLUMNS = ["backend", "dtype", "d", "n", "causal", "batch", "heads", "time_ms", "time_ms_min",
           "repeats", "tflops", "sm_clock_mhz", "status"]
FULL_NS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
TARGET_ROWS = 1 << 21
D = 128
WORKSPACE = 256 << 20
TINY = {"n": 256, "seqs": 3}


# ---------------------------------------------------------------------------- the jobs

def dense_jobs(quick: bool) -> list[dict]:
    ns = [n for n in FULL_NS if n <= 8192] if quick else FULL_NS
    jobs = []
    for n in ns:
        for d in (64, 128):
            for causal in (False, True):
                for shape in ("one", "filled"):
                    heads = 1 if shape == "one" else max(1, TARGET_ROWS // n)
                    for b in ("fa2", "fa3"):
                        jobs.append({"kind": "single", "backend": f"flashinfer-{b}", "fi": b,
                                     "n": n, "d": d, "causal": causal, "heads": heads,
                                     "kv_heads": heads, "module": f"single-{b}-d{d}"})
    return jobs


def serving_jobs(quick: bool) -> list[dict]:
    jobs = []
    for heads in (1, 32):
        for b in ("fa2", "fa3"):
            jobs.append({"workload": "prefill", "kind": "ragged", "fi": b, "heads": heads,
                         "backend": f"flashinfer-ragged-{b}", "module": f"ragged-{b}"})
            jobs.append({"workload": "window", "kind": "window", "fi": b, "heads": heads,
                         "backend": f"flashinfer-single-{b}", "module": f"single-{b}-swa"})
    for kvt in ("bf16", "fp8"):
        wl = "decode" if kvt == "bf16" else "decode-fp8"
        for b in ("decode", "decode-tc", "paged-fa3"):
            jobs.append({"workload": wl, "kind": "decode", "backend": f"flashinfer-{b}",
                         "path": b, "kv": kvt, "heads": traces.DECODE["heads"],
                         "module": f"decode-{b}-{kvt}"})
    for tr in traces.SHARED:
        for b, path in (("decode-tc", "decode-tc"), ("decode", "decode"),
                        ("cascade", "cascade")):
            jobs.append({"workload": tr["name"], "kind": "shared", "trace": tr["name"],
                         "backend": f"flashinfer-{b}", "path": path, "shared": True,
                         "heads": 32, "module": f"decode-{path}-bf16" if path != "cascade"
                         else "cascade"})
        jobs.append({"workload": tr["name"] + "-unshared", "kind": "shared",
                     "trace": tr["name"], "backend": "flashinfer-decode-tc", "path": "decode-tc",
                     "shared": False, "heads": 32, "module": "decode-decode-tc-bf16"})
    p = traces.SOFTCAP
    for b in ("fa2", "fa3"):
        for cap in (p["cap"], None):
            jobs.append({"workload": "softcap" if cap else "softcap-off", "kind": "gqa-prefill",
                         "backend": f"flashinfer-single-{b}", "fi": b, "cap": cap,
                         "heads": p["heads"], "module": f"single-{b}-cap{bool(cap)}"})
        if b == "fa2":   # the fa3 backend has no ALiBi (is_fa3_backend_supported)
            jobs.append({"workload": "alibi", "kind": "gqa-prefill", "alibi": True,
                         "backend": f"flashinfer-single-{b}", "fi": b, "cap": None,
                         "heads": p["heads"], "module": f"single-{b}-alibi"})
    s = traces.SINKS
    for b in ("fa2", "fa3"):
        for window in (s["window"], -1):
            tag = "window" if window > 0 else "full"
            jobs.append({"workload": f"sinks-{tag}", "kind": "sinks", "sinks": True,
                         "backend": f"flashinfer-sink-{b}", "fi": b, "window": window,
                         "heads": s["heads"], "module": f"sink-{b}-{tag}"})
            jobs.append({"workload": f"sinks-{tag}-off", "kind": "sinks", "sinks": False,
                         "backend": f"flashinfer-single-{b}", "fi": b, "window": window,
                         "heads": s["heads"], "module": f"single64-{b}-{tag}"})
    for b in ("fa2", "fa3"):
        jobs.append({"workload": "mla-decode", "kind": "mla", "backend": f"flashinfer-mla-{b}",
                     "fi": b, "heads": traces.MLA["heads"], "module": f"mla-{b}"})
    return jobs


# ---------------------------------------------------------------------------- builders

def build(torch, fi, job: dict, ctx: dict, tiny: bool = False):
    """(callable, info) for one job; ``tiny`` shrinks its sizes but keeps every template
    parameter (dtype, head dims, mask, variant), so that it compiles the same kernel."""
    return BUILDERS[job["kind"]](torch, fi, job, ctx, tiny)


def _rand(torch, *shape, dtype=None):
    return torch.randn(*shape, device="cuda", dtype=dtype or torch.bfloat16)


def _ws(torch, ctx):
    if "ws" not in ctx:
        ctx["ws"] = torch.zeros(WORKSPACE, dtype=torch.uint8, device="cuda")
    return ctx["ws"]


def _single(torch, fi, job, ctx, tiny):
    n, d, h = (TINY["n"] if tiny else job["n"]), job["d"], (1 if tiny else job["heads"])
    q, k, v = (_rand(torch, n, h, d) for _ in range(3))
    flops = 4.0 * n * n * d * h / (2 if job["causal"] else 1)
    info = {"flops": flops}
    return (lambda: fi.single_prefill_with_kv_cache(q, k, v, causal=job["causal"],
                                                    backend=job["fi"])), info


def _ragged(torch, fi, job, ctx, tiny):
    lens = ctx["prefill"][:TINY["seqs"]] if tiny else ctx["prefill"]
    lens = [min(n, TINY["n"]) for n in lens] if tiny else lens
    h = job["heads"]
    total = sum(lens)
    ind = torch.tensor([0] + list(_cumsum(lens)), dtype=torch.int32, device="cuda")
    w = fi.BatchPrefillWithRaggedKVCacheWrapper(_ws(torch, ctx), "NHD", backend=job["fi"])
    w.plan(ind, ind, h, h, D, causal=True, q_data_type=torch.bfloat16,
           kv_data_type=torch.bfloat16)
    q, k, v = (_rand(torch, total, h, D) for _ in range(3))
    info = {"tokens": total, "sequences": len(lens),
            "flops": sum(4.0 * D * h * n * (n + 1) / 2 for n in lens),
            "kv_bytes_touched": 4 * 2 * D * h * total}
    return (lambda: w.run(q, k, v)), info


def _window(torch, fi, job, ctx, tiny):
    n, wdw = (TINY["n"], 64) if tiny else (ctx["window"]["n"], ctx["window"]["window"])
    h = job["heads"]
    q, k, v = (_rand(torch, n, h, D) for _ in range(3))
    pairs = sum(min(i, wdw) + 1 for i in range(n))
    info = {"n": n, "window": wdw, "flops": 4.0 * D * h * pairs,
            "kv_bytes_touched": 4 * 2 * D * h * n,
            "note": "window_left = window: keys i - window … i, as the FlexAttention row"}
    return (lambda: fi.single_prefill_with_kv_cache(q, k, v, causal=True, window_left=wdw,
                                                    backend=job["fi"])), info


def _gqa_prefill(torch, fi, job, ctx, tiny):
    p = traces.SOFTCAP
    n = TINY["n"] if tiny else p["n"]
    q = _rand(torch, n, p["heads"], D)
    k, v = (_rand(torch, n, p["kv_heads"], D) for _ in range(2))
    kw = {"causal": True, "backend": job["fi"]}
    if job.get("cap"):
        kw["logits_soft_cap"] = job["cap"]
    if job.get("alibi"):
        kw["pos_encoding_mode"] = "ALIBI"
    info = {"n": n, "kv_heads": p["kv_heads"], "cap": job.get("cap"),
            "alibi": bool(job.get("alibi")),
            "flops": 4.0 * D * p["heads"] * n * (n + 1) / 2,
            "kv_bytes_touched": 2 * D * n * (2 * p["heads"] + 2 * p["kv_heads"])}
    return (lambda: fi.single_prefill_with_kv_cache(q, k, v, **kw)), info


def _pages(torch, lens, page, shared_prefix=0, shuffle=True):
    """FlashInfer's paged-K/V inputs for ``lens`` (each sequence's own tokens), optionally all
    starting with the same ``shared_prefix`` tokens' pages: (indptr, indices, last, pool)."""
    pre = shared_prefix // page
    own = [-(-n // page) for n in lens]
    pool = pre + sum(own)
    perm = torch.randperm(pool, device="cuda", dtype=torch.int64).to(torch.int32) if shuffle \
        else torch.arange(pool, device="cuda", dtype=torch.int32)
    rows, at = [], pre
    for k in own:
        rows.append(torch.cat([perm[:pre], perm[at:at + k]]))
        at += k
    indptr = torch.tensor([0] + list(_cumsum([pre + k for k in own])), dtype=torch.int32,
                          device="cuda")
    last = torch.tensor([n - (k - 1) * page for n, k in zip(lens, own, strict=True)],
                        dtype=torch.int32, device="cuda")
    return indptr, torch.cat(rows), last, pool, perm


def _decode_call(torch, fi, ctx, path, kv, lens, page, hq, hk, shared_prefix=0, shared=True):
    fp8 = kv == "fp8"
    kvd = torch.float8_e4m3fn if fp8 else torch.bfloat16
    b = len(lens)
    if shared_prefix and not shared:       # the same lengths, every page its own
        lens, shared_prefix = [n + shared_prefix for n in lens], 0
    indptr, indices, last, pool, perm = _pages(torch, lens, page, shared_prefix)
    kc, vc = (_rand(torch, pool, page, hk, D).to(kvd) for _ in range(2))
    q = _rand(torch, b, hq, D)
    ws = _ws(torch, ctx)
    if path in ("decode", "decode-tc"):
        w = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=path == "decode-tc")
        w.plan(indptr, indices, last, hq, hk, D, page, q_data_type=torch.bfloat16,
               kv_data_type=kvd)
        return lambda: w.run(q, (kc, vc)), pool
    if path == "paged-fa3":
        w = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="fa3")
        qo = torch.arange(b + 1, dtype=torch.int32, device="cuda")
        w.plan(qo, indptr, indices, last, hq, hk, D, page, causal=False,
               q_data_type=torch.bfloat16, kv_data_type=kvd)
        return lambda: w.run(q, (kc, vc)), pool
    # cascade: level 0 the shared prefix (all queries one request), level 1 each own suffix
    pre = shared_prefix // page
    w = fi.MultiLevelCascadeAttentionWrapper(2, ws, "NHD")
    own_k = [-(-n // page) for n in lens]
    own_idx = torch.cat([indices[int(indptr[i]) + pre:int(indptr[i + 1])] for i in range(b)])
    qo0 = torch.tensor([0, b], dtype=torch.int32, device="cuda")
    qo1 = torch.arange(b + 1, dtype=torch.int32, device="cuda")
    ind0 = torch.tensor([0, pre], dtype=torch.int32, device="cuda")
    ind1 = torch.tensor([0] + list(_cumsum(own_k)), dtype=torch.int32, device="cuda")
    last0 = torch.tensor([page], dtype=torch.int32, device="cuda")
    w.plan([qo0, qo1], [ind0, ind1], [perm[:pre].contiguous(), own_idx], [last0, last], hq, hk,
           D, page, q_data_type=torch.bfloat16, kv_data_type=kvd)
    return lambda: w.run(q, (kc, vc)), pool


def _decode(torch, fi, job, ctx, tiny):
    p = traces.DECODE
    lens = [min(n, 100) for n in ctx["decode"][:TINY["seqs"]]] if tiny else ctx["decode"]
    hk, page = p["kv_heads"], p["page_size"]
    eb = 1 if job["kv"] == "fp8" else 2
    fn, pool = _decode_call(torch, fi, ctx, job["path"], job["kv"], lens, page, job["heads"], hk)
    info = {"sequences": len(lens), "kv_heads": hk, "page_size": page, "kv_dtype": job["kv"],
            "cache_tokens": sum(lens), "flops": 4.0 * D * job["heads"] * sum(lens),
            "kv_bytes_touched": 2 * eb * D * hk * sum(-(-n // page) * page for n in lens)}
    return fn, info


def _shared(torch, fi, job, ctx, tiny):
    tr = next(t for t in traces.SHARED if t["name"] == job["trace"])
    hk, page = 8, 16
    own = traces.shared_prefix_suffixes(tr)
    prefix = tr["prefix"]
    if tiny:
        own, prefix = [min(n, 40) for n in own[:TINY["seqs"]]], 64
    fn, pool = _decode_call(torch, fi, ctx, job["path"], "bf16", own, page, job["heads"], hk,
                            shared_prefix=prefix, shared=job["shared"])
    per_page = 2 * 2 * D * hk * page
    own_pages = sum(-(-n // page) for n in own)
    info = {"sequences": len(own), "kv_heads": hk, "page_size": page, "prefix": prefix,
            "shared": job["shared"], "cache_tokens": sum(own) + prefix * len(own),
            "flops": 4.0 * D * job["heads"] * (sum(own) + prefix * len(own)),
            "kv_bytes_touched": per_page * (prefix // page + own_pages if job["shared"]
                                            else pool),
            "kv_bytes_per_sequence_sum": per_page * (own_pages + len(own) * (prefix // page))}
    return fn, info


def _sinks(torch, fi, job, ctx, tiny):
    s = traces.SINKS
    n, d, hq, hk = (TINY["n"] if tiny else s["n"]), s["d"], s["heads"], s["kv_heads"]
    window = job["window"]
    q = _rand(torch, n, hq, d)
    pairs = sum((min(i, window) if window > 0 else i) + 1 for i in range(n))
    info = {"n": n, "kv_heads": hk, "d": d, "window": window, "sinks": job["sinks"],
            "flops": 4.0 * d * hq * pairs, "kv_bytes_touched": 2 * d * n * (2 * hq + 2 * hk)}
    if not job["sinks"]:
        k, v = (_rand(torch, n, hk, d) for _ in range(2))
        return (lambda: fi.single_prefill_with_kv_cache(q, k, v, causal=True,
                                                        window_left=window,
                                                        backend=job["fi"])), info
    page = 16
    indptr, indices, last, pool, _ = _pages(torch, [n], page, shuffle=False)
    kc, vc = (_rand(torch, pool, page, hk, d) for _ in range(2))
    w = fi.BatchAttentionWithAttentionSinkWrapper(
        _ws(torch, ctx), "NHD", backend=job["fi"], q_data_type=torch.bfloat16,
        kv_data_type=torch.bfloat16, head_dim_qk=d, head_dim_vo=d, window_left=window)
    qo = torch.tensor([0, n], dtype=torch.int32, device="cuda")
    w.plan(qo, indptr, indices, last, hq, hk, d, page, causal=True, window_left=window,
           q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    sink = torch.randn(hq, device="cuda", dtype=torch.float32)
    scale = 1.0 / math.sqrt(d)
    return (lambda: w.run(q, (kc, vc), sink, scale)), {**info, "page_size": page}


def _mla(torch, fi, job, ctx, tiny):
    p = traces.MLA
    lens = [min(n, 200) for n in traces.mla_cache_lengths()[:TINY["seqs"]]] if tiny \
        else traces.mla_cache_lengths()
    page, h, dc, dr = p["page_size"], p["heads"], p["d_ckv"], p["d_kpe"]
    b = len(lens)
    indptr, indices, _last, pool, _ = _pages(torch, lens, page)
    ckv, kpe = _rand(torch, pool, page, dc), _rand(torch, pool, page, dr)
    qn, qp = _rand(torch, b, h, dc), _rand(torch, b, h, dr)
    w = fi.BatchMLAPagedAttentionWrapper(_ws(torch, ctx), backend=job["fi"])
    w.plan(torch.arange(b + 1, dtype=torch.int32, device="cuda"), indptr, indices,
           torch.tensor(lens, dtype=torch.int32, device="cuda"), h, dc, dr, page, False,
           1.0 / math.sqrt(128 + dr), torch.bfloat16, torch.bfloat16)
    info = {"sequences": b, "page_size": page, "d_qk": dc + dr, "d_v": dc,
            "cache_tokens": sum(lens), "flops": 2.0 * h * sum(lens) * (dc + dr + dc),
            "kv_bytes_touched": 2 * (dc + dr) * sum(-(-n // page) * page for n in lens),
            "note": "absorbed MLA: one latent row (512 + 64) per token read once for K and V"}
    return (lambda: w.run(qn, qp, ckv, kpe)), info


BUILDERS = {"single": _single, "ragged": _ragged, "window": _window, "gqa-prefill": _gqa_prefill,
            "decode": _decode, "shared": _shared, "sinks": _sinks, "mla": _mla}


def _cumsum(xs):
    s = 0
    for x in xs:
        s += x
        yield s


# ---------------------------------------------------------------------------- compile first

def _context(quick: bool) -> dict:
    prefill = traces.prefill_lengths(cap=1 << 17)
    decode = traces.decode_cache_lengths()
    win = dict(traces.WINDOW)
    if quick:
        prefill, decode, win = prefill[:8], [n // 8 for n in decode[:16]], {"n": 8192,
                                                                           "window": 1024}
    return {"prefill": prefill, "decode": decode, "window": win}


def _warm(torch, fi, job: dict, ctx: dict) -> str:
    """Compile and run a tiny instance of ``job``'s kernel once (on a compile thread)."""
    try:
        fn, _ = build(torch, fi, job, dict(ctx), tiny=True)
        fn()
        torch.cuda.synchronize()
        return "ok"
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:300]}"


def compile_all(torch, fi, jobs: list[dict], ctx: dict, threads: int, deadline_s: float,
                t0: float, log) -> dict[str, str]:
    """Each distinct module of ``jobs`` built on ``threads`` threads, in the jobs' order:
    module -> "ok" or why not. Builds still running at ``deadline_s`` (from ``t0``) are
    stopped."""
    first = {}
    for j in jobs:
        first.setdefault(j["module"], j)
    log(f"compiling {len(first)} kernels, {threads} at a time "
        f"(MAX_JOBS={os.environ.get('MAX_JOBS')})")
    out = {}
    ex = cf.ThreadPoolExecutor(threads)
    started = {}

    def one(mod, job):
        started[mod] = time.perf_counter()
        if started[mod] - t0 > deadline_s:
            return "not-compiled: the compile deadline passed before it started"
        return _warm(torch, fi, job, ctx)

    futs = {ex.submit(one, m, j): m for m, j in first.items()}
    left = max(0.0, deadline_s - (time.perf_counter() - t0))
    try:
        for f in cf.as_completed(futs, timeout=left):
            mod = futs[f]
            out[mod] = f.result()
            took = time.perf_counter() - started.get(mod, time.perf_counter())
            log(f"  compiled {mod:28s} {took:5.0f}s {out[mod] if out[mod] != 'ok' else ''}")
    except cf.TimeoutError:
        log("compile deadline: stopping the builds still running")
        subprocess.run(["pkill", "-f", "ninja"], check=False)
        subprocess.run(["pkill", "-f", "cicc|ptxas|nvcc"], check=False)
    for f, mod in futs.items():
        if mod not in out:
            try:
                r = f.result(timeout=60)
            except Exception as e:
                r = f"{type(e).__name__}"
            out[mod] = r if r.startswith("not-compiled") else \
                f"not-compiled: stopped at the compile deadline ({r[:120]})"
    ex.shutdown(wait=False, cancel_futures=True)
    return out


# ---------------------------------------------------------------------------- main

def start(name: str, script: str, output: str):
    """What a FlashInfer measuring script starts with: its output folder made, CUDA's torch and
    flashinfer (None, with one line said, where either is missing), the clock's start, a
    logger of the seconds since, the run's provenance (the GPU, its driver, the versions,
    ``script``, and the GPU's GEMM rate and HBM read rate measured now) and NVML's handle:
    (torch, fi, t0, log, prov, nv, out_dir)."""
    out_dir = Path(output)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MAX_JOBS", "4")
    torch = cuda_torch(name)
    if torch is None:
        return None
    try:
        import flashinfer as fi
    except ImportError as e:
        print(f"{name}: flashinfer is not importable ({e}); install flashinfer-python",
              file=sys.stderr)
        return None
    t0 = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t0:5.0f}s] {msg}", flush=True)

    props = torch.cuda.get_device_properties(0)
    nv = nvml()
    prov = {"gpu": props.name, "sm_count": props.multi_processor_count,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "driver": nv["driver"] if nv else "unknown",
            "max_sm_clock_mhz": nv["max_sm"] if nv else "unknown",
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "flashinfer": getattr(fi, "__version__", "unknown"),
            "python": platform.python_version(),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "timing": "CUDA events around repeated calls after warm-up; median per call; "
                      "kernels JIT-compiled before timing",
            "script": script}
    prov["gemm_8192_bf16_tflops"] = round(gemm_rate(torch, torch.bfloat16), 1)
    ceil = read_ceiling(torch)
    prov.update({f"hbm_{k}": v for k, v in ceil.items()})
    log(f"GEMM {prov['gemm_8192_bf16_tflops']} TFLOP/s, HBM read {ceil['read_tbs']} TB/s "
        f"(copy {ceil['copy_tbs']})")
    return torch, fi, t0, log, prov, nv, out_dir


def main() -> int:
    ap = parser(__doc__, "N ≤ 8K and small traces", 500.0)
    ap.add_argument("--part", choices=("dense", "serving"), required=True)
    ap.add_argument("--compile-threads", type=int, default=8,
                    help="kernels compiled at a time before any timing (default 8)")
    ap.add_argument("--compile-deadline-s", type=float, default=None,
                    help="stop compiling after this many seconds (default: 70%% of "
                         "--deadline-s)")
    ap.add_argument("--only", default=None,
                    help="comma-separated workloads (serving part), in the order to run them")
    ap.add_argument("--resume", default=None,
                    help="an earlier serving JSON: keep its measured rows, run the rest")
    ap.add_argument("--skip", default="", help="comma-separated job modules not to run")
    a = ap.parse_args()
    started = start("gpu_flashinfer", f"scripts/gpu/gpu_flashinfer.py --part {a.part}"
                    + (" --quick" if a.quick else ""), a.output)
    if started is None:
        return 1
    torch, fi, t0, log, prov, nv, out_dir = started
    ctx = _context(a.quick)
    jobs = dense_jobs(a.quick) if a.part == "dense" else serving_jobs(a.quick)
    if a.only:
        order = a.only.split(",")
        jobs = sorted((j for j in jobs if j.get("workload") in order),
                      key=lambda j: order.index(j["workload"]))
    jobs = [j for j in jobs if j["module"] not in a.skip.split(",")]
    kept = []
    if a.resume:
        earlier = json.loads(Path(a.resume).read_text())
        kept = [m for m in earlier["measurements"] if m["status"] == "ok"]
        done = {(m["workload"], m["backend"], m["heads"]) for m in kept}
        jobs = [j for j in jobs if (j["workload"], j["backend"], j["heads"]) not in done]
        prov["runs"] = earlier["provenance"].get("runs", []) + [
            {k: earlier["provenance"][k] for k in ("gpu", "date", "script")
             if k in earlier["provenance"]}]
        log(f"resume: {len(kept)} rows kept from {a.resume}, {len(jobs)} jobs to run")
    cdl = a.compile_deadline_s if a.compile_deadline_s is not None else 0.7 * a.deadline_s
    compiled = compile_all(torch, fi, jobs, ctx, a.compile_threads, cdl, t0, log)
    if a.part == "dense":
        return _run_dense(torch, fi, jobs, ctx, compiled, prov, out_dir, a, t0, log, nv)
    return _run_serving(torch, fi, jobs, ctx, compiled, prov, out_dir, a, t0, log, kept)


def _measure(torch, fi, job, ctx, compiled, a, t0):
    """(status, ms, ms_min, reps, info) for one job."""
    if time.perf_counter() - t0 > a.deadline_s:
        return "skipped-deadline", None, None, 0, {}
    if compiled.get(job["module"], "ok") != "ok":
        why = compiled[job["module"]]
        return (why if why.startswith("not-compiled") else f"error-compile: {why}"), \
            None, None, 0, {}
    fn = None
    try:
        fn, info = build(torch, fi, job, ctx)
        ms, ms_min, reps = time_calls(torch, fn, warmup=2, budget_ms=400, most=30, least=3,
                                      quick=a.quick)
        return "ok", ms, ms_min, reps, info
    except Exception as e:   # an unsupported path or out of memory: recorded, not fatal
        msg = str(e)
        msg = msg if len(msg) < 600 else msg[:200] + " … " + msg[-400:]
        return f"error-{type(e).__name__}: {msg}", None, None, 0, {}
    finally:
        fn = None
        ctx.pop("ws", None)
        torch.cuda.empty_cache()


def _run_dense(torch, fi, jobs, ctx, compiled, prov, out_dir, a, t0, log, nv):
    path = out_dir / "flashinfer-dense.csv"
    with open(path, "w") as out:
        for k, v in prov.items():
            out.write(f"# {k}: {v}\n")
        out.write(",".join(COLUMNS) + "\n")
        for job in jobs:
            status, ms, ms_min, reps, info = _measure(torch, fi, job, ctx, compiled, a, t0)
            row = {"backend": job["backend"], "dtype": "bf16", "d": job["d"], "n": job["n"],
                   "causal": int(job["causal"]), "batch": 1, "heads": job["heads"],
                   "time_ms": "", "time_ms_min": "", "repeats": reps, "tflops": "",
                   "sm_clock_mhz": "", "status": status.replace(",", ";").replace("\n", " ")}
            if status == "ok":
                row.update(time_ms=f"{ms:.6f}", time_ms_min=f"{ms_min:.6f}",
                           tflops=f"{info['flops'] / (ms * 1e-3) / 1e12:.3f}",
                           sm_clock_mhz=sm_clock(nv))
            out.write(",".join(str(row[c]) for c in COLUMNS) + "\n")
            out.flush()
            log(f"{job['backend']:16s} N={job['n']:<6d} d={job['d']} causal={int(job['causal'])}"
                f" heads={job['heads']:<4d} {f'{ms:.3f} ms' if ms else status[:80]}")
    log(f"wrote {path}")
    return 0


def _run_serving(torch, fi, jobs, ctx, compiled, prov, out_dir, a, t0, log, kept):
    path = out_dir / "flashinfer-serving.json"
    result = {"provenance": prov, "d": D, "dtype": "bf16",
              "traces": {"prefill_lengths": ctx["prefill"],
                         "decode_cache_lengths": ctx["decode"], "decode": traces.DECODE,
                         "window": ctx["window"], "shared": traces.SHARED,
                         "mla": traces.MLA, "softcap": traces.SOFTCAP, "sinks": traces.SINKS},
              "measurements": list(kept)}
    for job in jobs:
        status, ms, ms_min, reps, info = _measure(torch, fi, job, ctx, compiled, a, t0)
        entry = {"workload": job["workload"], "backend": job["backend"], "heads": job["heads"],
                 "status": status}
        if status == "ok":
            entry.update({**info, "time_ms": ms, "time_ms_min": ms_min, "repeats": reps,
                          "tflops": info["flops"] / (ms * 1e-3) / 1e12})
            if "kv_bytes_touched" in info:
                entry["read_tbs"] = info["kv_bytes_touched"] / (ms * 1e-3) / 1e12
        result["measurements"].append(entry)
        path.write_text(json.dumps(result, indent=1))
        extra = f" {entry['read_tbs']:.2f} TB/s" if "read_tbs" in entry else ""
        log(f"{job['workload']:18s} {job['backend']:24s} heads={job['heads']:<3d} "
            f"{f'{ms:.3f} ms' if ms else status[:100]}{extra}")
    log(f"wrote {path}: {len(result['measurements'])} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
