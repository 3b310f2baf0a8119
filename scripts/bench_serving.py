"""Serving-workload benchmark (issue #29's targets) on the schedule generator, asplos26, d = 128,
the traces of scripts/gpu/serving_traces.py:

* varlen prefill: 64 prompts with lengths drawn from a log-normal of median 1,024 (seeded),
  causal: PE utilization by MAC (target ≥ 90%) and cycles against the same sequences
  scheduled one by one (target ≤ 1.03×).
* sliding window: N = 131,072, window 4,096, causal: cycles against the ideal of the window's
  MACs on the array (target ≤ 1.10×) and bytes read against the closed form (within 5%).
* paged decode: 256 sequences with caches of 1K–32K keys, GQA 32/8, pages of 16 keys: bytes
  read against the K/V bytes the caches hold plus the block tables (target ≤ 1.02×), cycles
  against the same caches contiguous (target ≤ 1.05×), and the program's size.

    python scripts/bench_serving.py [--only prefill,window,decode] [--json data/serving/F.json]

Prints the figures and the wall time of each; ``--json`` writes them with the lengths used.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
import serving_traces as traces  # noqa: E402

from attenio.base import config as C  # noqa: E402
from attenio.contract.program import Op  # noqa: E402
from attenio.contract.rules import PageWalk  # noqa: E402
from attenio.sim.schedule import schedule  # noqa: E402

D = 128


def varlen_prefill(hw: C.HardwareConfig, lens: list[int], heads: int = 1) -> dict:
    wl = C.VarlenWorkload.from_options(hw, seqlens=lens, d=D, heads=heads, causal=True)
    t0 = time.perf_counter()
    batch = schedule(hw, wl, keep_spans=False)
    t_batch = time.perf_counter() - t0
    alone = [schedule(hw, wl.sequence(i), keep_spans=False) for i in range(wl.sequences)]
    one_by_one = sum(s.total_cycles for s in alone)
    return {
        "workload": wl.to_dict(), "cycles": batch.total_cycles,
        "pe_util_mac": batch.pe_util_mac, "pe_util_time": batch.pe_util_time,
        "one_by_one_cycles": one_by_one, "vs_one_by_one": batch.total_cycles / one_by_one,
        "read_bytes": batch.read_bytes, "closed_form_read_bytes": batch.traffic.read_bytes,
        "program_instructions": len(batch.program), "model_s": t_batch,
    }


def sliding_window(hw: C.HardwareConfig, n: int, window: int) -> dict:
    wl = C.Workload.from_options(hw, n=n, d=D, causal=True, window=(window, -1))
    t0 = time.perf_counter()
    s = schedule(hw, wl, keep_spans=False)
    ideal = s.useful_macs / hw.macs
    return {"workload": wl.to_dict(), "cycles": s.total_cycles, "ideal_cycles": ideal,
            "vs_ideal": s.total_cycles / ideal, "read_bytes": s.read_bytes,
            "closed_form_read_bytes": s.traffic.read_bytes, "pe_util_mac": s.pe_util_mac,
            "model_s": time.perf_counter() - t0}


def paged_decode(hw: C.HardwareConfig, lens: list[int]) -> dict:
    p = traces.DECODE
    opts = {"seqlens": [1] * len(lens), "nk": lens, "d": D, "heads": p["heads"],
            "kv_heads": p["kv_heads"]}
    t0 = time.perf_counter()
    paged = schedule(hw, C.VarlenWorkload.from_options(hw, page_size=p["page_size"], **opts),
                     keep_spans=False)
    t_paged = time.perf_counter() - t0
    flat = schedule(hw, C.VarlenWorkload.from_options(hw, **opts), keep_spans=False)
    eb = hw.element_bytes
    kv = 2 * p["kv_heads"] * sum(lens) * hw.row_elements(D) * eb
    table = sum(PageWalk(i.table, i.keys, i.page_log2, hw.axi_data_bytes).words
                for i in paged.program if i.op == Op.LOAD_KV) * hw.axi_data_bytes
    q = paged.workload.seq_q * p["heads"] * hw.row_elements(D) * eb
    return {"workload": paged.workload.to_dict(), "cycles": paged.total_cycles,
            "contiguous_cycles": flat.total_cycles,
            "vs_contiguous": paged.total_cycles / flat.total_cycles,
            "read_bytes": paged.read_bytes, "kv_bytes_touched": kv, "table_bytes": table,
            "q_bytes": q, "vs_touched": paged.read_bytes / (kv + table),
            "closed_form_read_bytes": paged.traffic.read_bytes,
            "program_instructions": len(paged.program),
            "pages": sum(-(-n // p["page_size"]) for n in lens), "model_s": t_paged}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="prefill,window,decode")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    hw = C.asplos26()
    out: dict = {"command": "python scripts/bench_serving.py --only " + a.only,
                 "preset": "asplos26", "d": D}
    jobs = a.only.split(",")
    if "prefill" in jobs:
        lens = traces.prefill_lengths(cap=hw.max_seq_len)
        r = out["varlen_prefill"] = varlen_prefill(hw, lens)
        out["prefill_lengths"] = lens
        print(f"varlen prefill: {len(lens)} sequences, {sum(lens):,} tokens "
              f"({min(lens)}-{max(lens)}), causal")
        print(f"  cycles        {r['cycles']:,} ({r['vs_one_by_one']:.4f}x one by one; "
              "target <= 1.03x)")
        print(f"  PE by MAC     {r['pe_util_mac']:.2%} (target >= 90%)")
        print(f"  DRAM read     {r['read_bytes']:,} B (closed form "
              f"{r['closed_form_read_bytes']:,} B); model {r['model_s']:.1f} s")
    if "window" in jobs:
        w = traces.WINDOW
        r = out["sliding_window"] = sliding_window(hw, w["n"], w["window"])
        print(f"sliding window: N = {w['n']:,}, window {w['window']:,}, causal")
        print(f"  cycles        {r['cycles']:,} ({r['vs_ideal']:.4f}x the ideal "
              f"{r['ideal_cycles']:,.0f}; target <= 1.10x)")
        print(f"  DRAM read     {r['read_bytes']:,} B (closed form "
              f"{r['closed_form_read_bytes']:,} B; target within 5%); model "
              f"{r['model_s']:.1f} s")
    if "decode" in jobs:
        lens = traces.decode_cache_lengths()
        r = out["paged_decode"] = paged_decode(hw, lens)
        out["decode_cache_lengths"] = lens
        print(f"paged decode: {len(lens)} sequences, caches {min(lens):,}-{max(lens):,} keys "
              f"({r['pages']:,} pages of {traces.DECODE['page_size']}), GQA "
              f"{traces.DECODE['heads']}/{traces.DECODE['kv_heads']}")
        print(f"  DRAM read     {r['read_bytes']:,} B = {r['vs_touched']:.4f}x the K/V bytes "
              f"touched {r['kv_bytes_touched']:,} + tables {r['table_bytes']:,} (target <= "
              f"1.02x; Q {r['q_bytes']:,} B of the rest)")
        print(f"  cycles        {r['cycles']:,} ({r['vs_contiguous']:.4f}x contiguous caches "
              f"{r['contiguous_cycles']:,}; target <= 1.05x)")
        print(f"  program       {r['program_instructions']:,} instructions for "
              f"{r['pages']:,} pages; model {r['model_s']:.1f} s")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=1))
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
