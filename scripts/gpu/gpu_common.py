"""What the GPU measurement scripts share: their common options, finding CUDA PyTorch and
timing a call."""

from __future__ import annotations

import argparse
import os
import statistics
import sys


def parser(doc: str, quick: str, deadline_s: float) -> argparse.ArgumentParser:
    """A measurement script's options: ``-o`` (required), ``--quick`` (``quick`` says what it
    shrinks) and ``--deadline-s``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--quick", action="store_true", help=f"{quick} (a smoke run)")
    ap.add_argument("--deadline-s", type=float, default=deadline_s,
                    help="start nothing new after this many seconds")
    return ap


def cuda_torch(script: str):
    """PyTorch with CUDA, or ``None`` after one line on stderr saying what is missing."""
    try:
        import torch
    except ImportError:
        print(f"{script}: PyTorch is not installed; run this on a CUDA machine with torch",
              file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{script}: CUDA is not available on this machine; run it on a GPU host",
              file=sys.stderr)
        return None
    return torch


def time_calls(torch, fn, *, warmup: int = 2, budget_ms: float = 600.0, most: int = 50,
               least: int = 5, quick: bool = False) -> tuple[float, float, int]:
    """``fn`` after ``warmup`` calls, timed with CUDA events around each of repeated calls (as
    many as fit ``budget_ms``, ``least`` to ``most``; 3 with ``quick``): (median ms, min ms,
    calls)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    est = start.elapsed_time(end)
    reps = 3 if quick else max(least, min(most, int(budget_ms / max(est, 1e-3))))
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times), reps


def gemm_rate(torch, dtype) -> float:
    a = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    b = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        a @ b
    e.record()
    e.synchronize()
    return 2 * 8192**3 * 10 / (s.elapsed_time(e) * 1e-3) / 1e12


def nvml():
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("CUDA_VISIBLE_DEVICES", "0")
                                                  .split(",")[0] or 0))
        drv = pynvml.nvmlSystemGetDriverVersion()
        return {"handle": h, "mod": pynvml, "driver": drv.decode() if isinstance(drv, bytes)
                else drv, "max_sm": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)}
    except Exception:
        return None


def sm_clock(nv):
    if not nv:
        return ""
    return nv["mod"].nvmlDeviceGetClockInfo(nv["handle"], nv["mod"].NVML_CLOCK_SM)


def read_ceiling(torch, gib: float = 4.0) -> dict:
    """The GPU's practical HBM read rate: a plain reduction over ``gib`` GiB of bf16 (sum and
    max; the faster counts), and a device-to-device copy (bytes read plus written), each the
    median of timed calls. TB/s, 10^12 bytes a second."""
    n = int(gib * 2**30) // 2
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    out = {"read_gib": gib}
    for name, fn, moved in (("sum", lambda: x.sum(dtype=torch.float32), 2 * n),
                            ("amax", lambda: x.amax(), 2 * n),
                            ("copy", lambda: y.copy_(x), 4 * n)):
        ms, _, _ = time_calls(torch, fn, warmup=2, budget_ms=300, most=20)
        out[f"{name}_tbs"] = round(moved / (ms * 1e-3) / 1e12, 3)
    out["read_tbs"] = max(out["sum_tbs"], out["amax_tbs"])
    return out
