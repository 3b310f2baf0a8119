"""Measure exact attention on a CUDA GPU: PyTorch SDPA per backend (and flash-attn if present).

Usage (on a machine with CUDA and PyTorch):
    python scripts/gpu/gpu_baseline.py -o data/gpu/h200.csv [--quick] [--deadline-s 480]

Sweeps dtype (bf16, fp16), head dim (64, 128), N (1K..128K), causal or not, and two shapes:
one head (batch = heads = 1) and a batch × heads that fills the GPU (about 2M query rows in
all). Each configuration: warm-up, then CUDA-event timing of repeated calls, median reported.
The SM clock is read through NVML right after each timed loop. The CSV starts with '#' lines of
provenance (GPU, driver, torch, CUDA, cuDNN, date, measured dense GEMM rate) and has one row per
(backend, dtype, d, N, causal, shape), with a status column for rows that could not run.

Exits 1 with one line when CUDA is not available.
"""

from __future__ import annotations

import datetime as dt
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_common import cuda_torch, gemm_rate, nvml, parser, sm_clock, time_calls  # noqa: E402

COLUMNS = ["backend", "dtype", "d", "n", "causal", "batch", "heads", "time_ms", "time_ms_min",
           "repeats", "tflops", "sm_clock_mhz", "status"]
FULL_NS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
TARGET_ROWS = 1 << 21  # query rows per launch for the "filled" shape
MATH_MAX_N = 8192  # the math backend materializes N×N scores


def attention_flops(n: int, d: int, causal: bool, batch: int, heads: int) -> float:
    """Useful FLOPs of exact attention: 4·N²·d per head (QKᵀ and PV), half under a mask."""
    f = 4.0 * n * n * d * batch * heads
    return f / 2 if causal else f


def main() -> int:
    ap = parser(__doc__, "N ≤ 8K, fewer repeats", 480.0)
    args = ap.parse_args()
    torch = cuda_torch("gpu_baseline")
    if torch is None:
        return 1
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    t_start = time.perf_counter()
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    nv = nvml()
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    try:
        import flash_attn  # noqa: F401
        from flash_attn import flash_attn_func
    except ImportError:
        flash_attn_func = None
    provenance = {
        "gpu": props.name, "sm_count": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "driver": nv["driver"] if nv else "unknown",
        "max_sm_clock_mhz": nv["max_sm"] if nv else "unknown",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
        "flash_attn": "installed" if flash_attn_func else "not installed",
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "timing": "CUDA events around repeated calls after warm-up; median per call",
        "script": "scripts/gpu/gpu_baseline.py",
    }
    for dtype_name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        provenance[f"gemm_8192_{dtype_name}_tflops"] = round(gemm_rate(torch, dtype), 1)
    ns = [n for n in FULL_NS if n <= 8192] if args.quick else FULL_NS
    rows = []
    out = open(args.output, "w")
    for k, v in provenance.items():
        out.write(f"# {k}: {v}\n")
    out.write(",".join(COLUMNS) + "\n")
    out.flush()

    def emit(row):
        rows.append(row)
        out.write(",".join(str(row[c]) for c in COLUMNS) + "\n")
        out.flush()

    for n in ns:
        for d in (64, 128):
            for dtype_name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
                for causal in (False, True):
                    for shape in ("one", "filled"):
                        bh = 1 if shape == "one" else max(1, TARGET_ROWS // n)
                        heads = min(bh, 16)
                        batch = max(1, bh // heads)
                        names = list(backends) + (["flash_attn"] if flash_attn_func else [])
                        for name in names:
                            base = {"backend": name, "dtype": dtype_name, "d": d, "n": n,
                                    "causal": int(causal), "batch": batch, "heads": heads,
                                    "time_ms": "", "time_ms_min": "", "repeats": 0,
                                    "tflops": "", "sm_clock_mhz": "", "status": "ok"}
                            if time.perf_counter() - t_start > args.deadline_s:
                                emit({**base, "status": "skipped-deadline"})
                                continue
                            if name == "math" and n > MATH_MAX_N:
                                emit({**base, "status": "skipped-math-n2-memory"})
                                continue
                            try:
                                q, kk, vv = (torch.randn(batch, heads, n, d, device=dev,
                                                         dtype=dtype) for _ in range(3))
                                if name == "flash_attn":
                                    qt, kt, vt = (x.transpose(1, 2).contiguous()
                                                  for x in (q, kk, vv))
                                    def fn(qt=qt, kt=kt, vt=vt, causal=causal):
                                        return flash_attn_func(qt, kt, vt, causal=causal)
                                else:
                                    def fn(name=name, q=q, kk=kk, vv=vv, causal=causal):
                                        with sdpa_kernel(backends[name]):
                                            return F.scaled_dot_product_attention(
                                                q, kk, vv, is_causal=causal)
                                ms, ms_min, reps = time_calls(torch, fn, quick=args.quick)
                                clock = sm_clock(nv)
                                fl = attention_flops(n, d, causal, batch, heads)
                                emit({**base, "time_ms": f"{ms:.6f}",
                                      "time_ms_min": f"{ms_min:.6f}", "repeats": reps,
                                      "tflops": f"{fl / (ms * 1e-3) / 1e12:.3f}",
                                      "sm_clock_mhz": clock})
                            except Exception as e:  # unsupported backend/shape, OOM
                                msg = type(e).__name__
                                if "out of memory" in str(e).lower():
                                    msg = "oom"
                                emit({**base, "status": f"error-{msg}"})
                            finally:
                                q = kk = vv = None
                                torch.cuda.empty_cache()
                        print(f"[{time.perf_counter() - t_start:6.0f}s] N={n} d={d} "
                              f"{dtype_name} causal={causal} {shape}", flush=True)
    out.close()
    ok = sum(r["status"] == "ok" for r in rows)
    print(f"wrote {args.output}: {len(rows)} rows, {ok} measured", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
