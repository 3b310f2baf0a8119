"""Measure FlashInfer on the model zoo's attention layers (model/zoo.toml): the GPU column of
``attenio model run``.

Usage (on a machine with CUDA, PyTorch and flashinfer-python 0.5.x):
    python scripts/gpu/gpu_zoo.py -o DIR [--ns 4096,16384] [--varlen] [--deadline-s 500] [--quick]
        [--layers NAME,...] [--backends fa2,fa3]

Writes DIR/flashinfer-zoo.json: for every distinct prefill layer type of the zoo (its query and
K/V heads, Q·K and V head dims, window, soft cap, softmax scale and sinks, with the models and
layers that have it), one causal sequence of each ``--ns`` length and, with ``--varlen``, the
serving trace's 64 prompts (``n`` = "prefill"; the lengths in the file's ``traces``), bf16, the
whole layer (all its heads) in one call, on every FlashInfer kernel that computes it:
``single_prefill_with_kv_cache`` for one prompt and ``BatchPrefillWithRaggedKVCacheWrapper``
for the trace (fa2 and fa3 backends; ``window_left = window − 1``, ``logits_soft_cap``,
``sm_scale``, V's own head dim) and, for the layers with sinks,
``BatchAttentionWithAttentionSinkWrapper`` (fa2 and fa3, each prompt's 16-token pages in
order). MLA's absorbed decode is the serving part's
``mla-decode`` (scripts/gpu/gpu_flashinfer.py). Kernels are compiled first, as that script
does (its ``compile_all``), then timed (CUDA events, median). A job that cannot run records why.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_flashinfer as gfi  # noqa: E402
from gpu_common import parser  # noqa: E402

ZOO = Path(__file__).resolve().parents[2] / "model" / "zoo.toml"
NS = (4096, 16384)
PAGE = 16


def zoo_signatures() -> dict[tuple, list[str]]:
    """Each distinct prefill attention of the zoo -> the ``model/layer`` names that have it.
    The signature: (heads, kv_heads, head_dim, head_dim_v, window, softcap, softmax_scale,
    sinks), 0 for a window, cap or scale the layer does not have."""
    out: dict[tuple, list[str]] = {}
    for key, m in tomllib.loads(ZOO.read_text()).items():
        for lt in m["layers"]:
            if lt.get("phase") == "decode":
                continue
            sig = (lt["heads"], lt["kv_heads"], lt["head_dim"],
                   lt.get("head_dim_v") or lt["head_dim"], lt.get("window") or 0,
                   lt.get("softcap") or 0.0, lt.get("softmax_scale") or 0.0,
                   bool(lt.get("sinks")))
            out.setdefault(sig, []).append(f"{key}/{lt['name']}")
    return out


def zoo_jobs(ns, varlen: bool = False, layers_only=None,
             backends=("fa2", "fa3")) -> list[dict]:
    """Every prefill layer type at each length of ``ns`` (one prompt), and with ``varlen`` on
    the serving trace's 64 prompts (``n`` = "prefill": scripts/gpu/serving_traces.py), on
    each kernel of ``backends`` that computes it; with ``layers_only`` (``model/layer``
    names) only the layer types that one of them names."""
    jobs = []
    for sig, layers in zoo_signatures().items():
        if layers_only and not set(layers_only) & set(layers):
            continue
        hq, hk, d, dv, window, cap, scale, sinks = sig
        for n in list(ns) + (["prefill"] if varlen else []):
            for b in backends:
                api = "sink" if sinks else ("ragged" if n == "prefill" else "single")
                module = (f"zsink-{b}-d{d}-w{bool(window)}" if sinks else
                          f"z{api[0]}-{b}-qk{d}-vo{dv}-swa{bool(window)}-cap{bool(cap)}")
                jobs.append({"workload": "zoo", "kind": f"zoo-{api}", "fi": b, "n": n,
                             "heads": hq, "kv_heads": hk, "d": d, "dv": dv, "window": window,
                             "cap": cap, "scale": scale, "sinks": sinks, "layers": layers,
                             "backend": f"flashinfer-{api}-{b}", "module": module})
    return jobs


def _lengths(job, ctx, tiny) -> list[int]:
    """The prompts' lengths: one of ``n``, or the serving trace's (shrunk for a compile)."""
    if job["n"] == "prefill":
        lens = ctx["prefill"]
        return [min(x, gfi.TINY["n"]) for x in lens[:gfi.TINY["seqs"]]] if tiny else lens
    return [gfi.TINY["n"] if tiny else job["n"]]


def _info(job, lens):
    w, hq, hk, d, dv = job["window"], job["heads"], job["kv_heads"], job["d"], job["dv"]
    pairs = sum(sum(min(i + 1, w) if w else i + 1 for i in range(n)) for n in lens)
    total = sum(lens)
    out = {"flops": 2.0 * hq * pairs * (d + dv),
           "bytes_moved": 2 * total * (hq * d + hk * d + hk * dv + hq * dv)}
    if len(lens) == 1 and job["n"] != "prefill":
        return {"n": lens[0], **out}
    return {"tokens": total, "sequences": len(lens), **out}


def _kwargs(job) -> dict:
    kw = {"causal": True, "window_left": job["window"] - 1 if job["window"] else -1}
    if job["cap"]:
        kw["logits_soft_cap"] = job["cap"]
    if job["scale"]:
        kw["sm_scale"] = job["scale"]
    return kw


def _zoo_single(torch, fi, job, ctx, tiny):
    lens = _lengths(job, ctx, tiny)
    n, hq, hk = lens[0], job["heads"], job["kv_heads"]
    q = gfi._rand(torch, n, hq, job["d"])
    k = gfi._rand(torch, n, hk, job["d"])
    v = gfi._rand(torch, n, hk, job["dv"])
    kw = {**_kwargs(job), "backend": job["fi"]}
    return (lambda: fi.single_prefill_with_kv_cache(q, k, v, **kw)), _info(job, lens)


def _zoo_ragged(torch, fi, job, ctx, tiny):
    lens = _lengths(job, ctx, tiny)
    hq, hk, d, dv, total = job["heads"], job["kv_heads"], job["d"], job["dv"], sum(lens)
    ind = torch.tensor([0] + list(gfi._cumsum(lens)), dtype=torch.int32, device="cuda")
    w = fi.BatchPrefillWithRaggedKVCacheWrapper(gfi._ws(torch, ctx), "NHD", backend=job["fi"])
    w.plan(ind, ind, hq, hk, d, head_dim_vo=dv, q_data_type=torch.bfloat16,
           kv_data_type=torch.bfloat16, **_kwargs(job))
    q, k = gfi._rand(torch, total, hq, d), gfi._rand(torch, total, hk, d)
    v = gfi._rand(torch, total, hk, dv)
    return (lambda: w.run(q, k, v)), _info(job, lens)


def _zoo_sink(torch, fi, job, ctx, tiny):
    lens = _lengths(job, ctx, tiny)
    hq, hk, d, dv = job["heads"], job["kv_heads"], job["d"], job["dv"]
    wl = job["window"] - 1 if job["window"] else -1
    q = gfi._rand(torch, sum(lens), hq, d)
    indptr, indices, last, pool, _ = gfi._pages(torch, lens, PAGE, shuffle=False)
    kc, vc = gfi._rand(torch, pool, PAGE, hk, d), gfi._rand(torch, pool, PAGE, hk, dv)
    w = fi.BatchAttentionWithAttentionSinkWrapper(
        gfi._ws(torch, ctx), "NHD", backend=job["fi"], q_data_type=torch.bfloat16,
        kv_data_type=torch.bfloat16, head_dim_qk=d, head_dim_vo=dv, window_left=wl)
    qo = torch.tensor([0] + list(gfi._cumsum(lens)), dtype=torch.int32, device="cuda")
    w.plan(qo, indptr, indices, last, hq, hk, d, PAGE, causal=True, window_left=wl,
           q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    sink = torch.randn(hq, device="cuda", dtype=torch.float32)
    scale = job["scale"] or 1.0 / math.sqrt(d)
    return (lambda: w.run(q, (kc, vc), sink, scale)), {**_info(job, lens), "page_size": PAGE}


gfi.BUILDERS.update({"zoo-single": _zoo_single, "zoo-ragged": _zoo_ragged,
                     "zoo-sink": _zoo_sink})


def main() -> int:
    ap = parser(__doc__, "N = 1024 only", 500.0)
    ap.add_argument("--ns", default=",".join(map(str, NS)),
                    help="one prompt's lengths, comma-separated (default 4096,16384; '' for "
                         "none)")
    ap.add_argument("--varlen", action="store_true",
                    help="also the serving trace's varlen prefill (64 prompts, "
                         "scripts/gpu/serving_traces.py)")
    ap.add_argument("--layers", default="",
                    help="only these layer types, as model/layer names, comma-separated "
                         "(e.g. gemma-3-12b/local); default every one")
    ap.add_argument("--backends", default="fa2,fa3",
                    help="FlashInfer backends, comma-separated (fa2, fa3)")
    ap.add_argument("--compile-threads", type=int, default=10)
    ap.add_argument("--compile-deadline-s", type=float, default=None,
                    help="stop compiling after this many seconds (default: 70%% of "
                         "--deadline-s)")
    a = ap.parse_args()
    ns = [1024] if a.quick else [int(x) for x in a.ns.split(",") if x]
    only = [x for x in a.layers.split(",") if x]
    backends = [x for x in a.backends.split(",") if x]
    known = {x for names in zoo_signatures().values() for x in names}
    if unknown := sorted(set(only) - known) + sorted(set(backends) - {"fa2", "fa3"}):
        print(f"gpu_zoo: unknown layer or backend {', '.join(unknown)}; layers: "
              f"{', '.join(sorted(known))}; backends: fa2, fa3", file=sys.stderr)
        return 2
    started = gfi.start("gpu_zoo", "scripts/gpu/gpu_zoo.py --ns " + ",".join(map(str, ns))
                        + (" --varlen" if a.varlen else "")
                        + (f" --layers {a.layers}" if only else "")
                        + (f" --backends {a.backends}" if a.backends != "fa2,fa3" else ""),
                        a.output)
    if started is None:
        return 1
    torch, fi, t0, log, prov, _, out_dir = started
    jobs = zoo_jobs(ns, a.varlen, only, backends)
    ctx = {"prefill": gfi._context(a.quick)["prefill"]}
    cdl = a.compile_deadline_s if a.compile_deadline_s is not None else 0.7 * a.deadline_s
    compiled = gfi.compile_all(torch, fi, jobs, ctx, a.compile_threads, cdl, t0, log)
    path = out_dir / "flashinfer-zoo.json"
    result = {"provenance": prov, "dtype": "bf16", "causal": True, "measurements": []}
    if a.varlen:
        result["traces"] = {"prefill_lengths": ctx["prefill"]}
    for job in jobs:
        status, ms, ms_min, reps, info = gfi._measure(torch, fi, job, ctx, compiled, a, t0)
        entry = {k: job[k] for k in ("layers", "backend", "n", "heads", "kv_heads", "d", "dv",
                                     "window", "cap", "scale", "sinks")}
        entry["status"] = status
        if status == "ok":
            entry.update({**info, "time_ms": ms, "time_ms_min": ms_min, "repeats": reps,
                          "tflops": info["flops"] / (ms * 1e-3) / 1e12})
        result["measurements"].append(entry)
        path.write_text(json.dumps(result, indent=1))
        said = f"{ms:.3f} ms, {entry['tflops']:.0f} TFLOP/s" if ms else status[:100]
        log(f"{job['layers'][0]:26s} N={job['n']!s:<8s} {job['backend']:22s} {said}")
    log(f"wrote {path}: {len(result['measurements'])} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
