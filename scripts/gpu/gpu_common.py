"""What the GPU measurement scripts share: their common options, finding CUDA PyTorch and
timing a call."""

from __future__ import annotations

import argparse
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
               quick: bool = False) -> tuple[float, float, int]:
    """``fn`` after ``warmup`` calls, timed with CUDA events around each of repeated calls (as
    many as fit ``budget_ms``, 5 to ``most``; 3 with ``quick``): (median ms, min ms, calls)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    est = start.elapsed_time(end)
    reps = 3 if quick else max(5, min(most, int(budget_ms / max(est, 1e-3))))
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times), reps
