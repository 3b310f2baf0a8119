"""FLAT and Standard as sequences of phases on the same engines and DRAM model: they do not fit
the instruction set (their tiles hold whole rows of S, or S and P leave the chip), so they emit
no program."""

from __future__ import annotations

from attenio.base.config import HardwareConfig, Workload
from attenio.contract.timing import Timing
from attenio.model import io_analysis as io
from attenio.sim.engines import ENGINES, cdiv
from attenio.sim.timeline import Schedule

__all__ = ["phase_model"]


def phase_model(hw: HardwareConfig, wl: Workload, tiling: io.Tiling,
                 timing: Timing) -> Schedule:
    """FLAT and Standard as sequences of phases, each ``L + max(PE, EXP, reads, writes)`` on
    the same engines (no program: they do not fit the instruction set)."""
    rate = min(hw.dram_bytes_per_cycle, hw.axi_data_bytes)
    lat = hw.dram_latency
    traffic = io.workload_traffic(hw, wl, tiling.dataflow, tiling)
    d, nq, nk = wl.head_dim, wl.seq_q, wl.seq_k
    heads = wl.batch * wl.heads
    busy = dict.fromkeys(ENGINES, 0)
    stalls: dict[str, int] = {}
    total = 0
    pairs = sum(max(0, min(nk, i + 1 + nk - nq)) for i in range(nq)) if wl.causal else nq * nk
    useful = 2 * d * pairs * heads

    def phase(pe: int, exp: int, rbytes: int, wbytes: int) -> None:
        nonlocal total
        r, w = cdiv(rbytes, rate), cdiv(wbytes, rate)
        dur = lat + max(pe, exp, r, w)
        busy["pe"] += pe
        busy["exp"] += exp
        busy["dma_read"] += r
        busy["dma_write"] += w
        total += dur
        stalls["pe: waiting for K/V (DRAM)"] = stalls.get("pe: waiting for K/V (DRAM)", 0) + \
            dur - pe

    eb = hw.element_bytes
    if tiling.dataflow == "flat":
        R = tiling.rows
        for _ in range(heads):
            for p0, r in io.query_tiles(nq, R, wl.causal):
                keys = io.tile_keys(p0, r, nq, nk, wl.causal, 1)
                b = max(1, hw.macs // r)
                pe = cdiv(keys, b) * cdiv(r * b, hw.macs) * d
                phase(0, 0, r * d * eb, 0)                         # Q rows
                phase(pe, 0, keys * d * eb, 0)                     # S = Q Kᵀ, K streamed
                phase(0, cdiv(r * keys, hw.exp_lanes), 0, 0)      # softmax on whole rows
                phase(pe, 0, keys * d * eb, r * d * hw.out_element_bytes)  # O = P V
        busy["finalize"] = 0
    else:
        per_head = {name: v // heads for name, v in traffic.reads.items()}
        gemm = cdiv(nq * nk * d, hw.macs)
        for _ in range(heads):
            phase(gemm, 0, (per_head["Q"] + per_head["K"]) * eb, nq * nk * eb)   # S = Q Kᵀ
            phase(0, cdiv(nq * nk, hw.exp_lanes), nq * nk * eb, nq * nk * eb)  # P = softmax(S)
            phase(gemm, 0, (per_head["P"] + per_head["V"]) * eb,                 # O = P V
                  nq * d * hw.out_element_bytes)
    return Schedule(hw, wl, tiling.dataflow, tiling, None, total, busy, stalls, useful,
                    traffic.read_bytes, traffic.write_bytes, [], timing)
