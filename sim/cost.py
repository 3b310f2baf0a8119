"""Area and energy estimates of a design point, for ``attenio explore`` (docs/explore.md).

Every figure here is an **estimate**, labeled as one in every report:

ASIC area and on-chip energy are calibrated to the one published breakdown: the AttenIO paper's
Table 3 (ASPLOS '26, TSMC 22 nm at 1 GHz: PE array 2.44 mm² and 2,583.92 mW for 2,048 16-bit
MACs, EXP unit 0.48 mm² and 485.84 mW for 128 lanes, KV buffer 0.01 mm² and 0.65 mW, on-chip
cache 0.79 mm² and 162.52 mW for 512 KB; total 3.72 mm², 3,232.93 mW). Per MAC, per EXP lane
and per KB they scale linearly; a MAC of B bits is taken as ``0.7·(B/16)² + 0.3·(B/16)`` of the
16-bit one (an assumption of this model: a multiplier grows with B², the adder and registers
with B). With one published configuration the scaling cannot be checked against the paper.

Energy per action:

* MAC: 2,583.92 mW / (2,048 MACs × 1 GHz) = 1.26 pJ per 16-bit MAC (the paper's PE power
  taken at full activity), scaled by bits as the area;
* exponential: 485.84 mW / (128 × 1 GHz) = 3.80 pJ;
* SRAM: per byte read or written, from Horowitz, "Computing's energy problem", ISSCC 2014
  (45 nm: a 64-bit access costs 10 pJ in 8 KB, 20 pJ in 32 KB, 100 pJ in 1 MB), interpolated
  in log size at the size of one bank (the buffers are banked by MAC line) and not scaled to
  22 nm (it overstates SRAM energy there). This design reads and writes its O accumulators in
  SRAM on every P·V issue (docs/architecture.md), where the paper's PEs keep them in registers,
  so SRAM dominates this model's energy;
* DRAM: 3.9 pJ/bit for HBM2 (O'Connor et al., "Fine-Grained DRAM", MICRO 2017), 31.2 pJ/B.

Static power is not modeled.

FPGA area (LFE5U-85F): block RAM from the memories' shapes (the DP16KD aspect ratios yosys maps
to), LUT4 sites, FFs and MULT18X18D linear in the MACs, the MAC lines, the MACs per line, a
constant and which LUT mapper yosys ended with (ABC9, or its ABC fallback); the coefficients
are least-squares fits on the synthesis reports in ``data/fpga/synth-sweep.json``
(``fit_fpga``; docs/explore.md gives the fit's error on configurations it was not fitted on).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from attenio.base.config import SCALE_EXP_BITS, HardwareConfig
from attenio.base.ecp5 import dp16kd_shape
from attenio.contract.formats import SHIFT_BITS

__all__ = ["asic_area", "energy", "fpga_area", "fit_fpga", "dp16kd_blocks", "ecp5_lut_sites",
           "ESTIMATE", "FPGA_DEVICE"]

ESTIMATE = "estimate"

# AttenIO, ASPLOS '26, Table 3 (22 nm, 1 GHz): area mm², power mW
T3_PE = (2.44, 2583.92)
T3_EXP = (0.48, 485.84)
T3_KV = (0.01, 0.65)
T3_CACHE = (0.79, 162.52)
T3_MACS, T3_EXP_LANES, T3_CACHE_KB, T3_CLOCK_GHZ = 2048, 128, 512, 1.0
# the paper's K/V buffer: kv_ring_depth 64 rows of d ≤ 256 at 2 bytes (the asplos26 preset)
T3_KV_BYTES = 64 * 256 * 2

# Horowitz, ISSCC 2014 (45 nm): pJ per 64-bit SRAM access by array size
SRAM_PJ_PER_64B = ((8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0))
DRAM_PJ_PER_BYTE = 3.9 * 8        # HBM2, O'Connor et al., MICRO 2017

# ECP5 devices' capacities by resource (Lattice's ECP5 family data sheet): the estimate here and
# the synthesis reports (fpga/synth.py) share them
ECP5_DEVICES = {
    "LFE5U-85F": {"LUT4": 83640, "TRELLIS_FF": 83640, "MULT18X18D": 156, "DP16KD": 208},
    "LFE5U-45F": {"LUT4": 43848, "TRELLIS_FF": 43848, "MULT18X18D": 72, "DP16KD": 108},
}
FPGA_DEVICE = ECP5_DEVICES["LFE5U-85F"]
SWEEP_FILE = Path(__file__).resolve().parents[1] / "data" / "fpga" / "synth-sweep.json"


def _mac_scale(bits: int) -> float:
    r = bits / 16
    return 0.7 * r * r + 0.3 * r


def onchip_bytes(hw: HardwareConfig) -> int:
    """The on-chip buffer budget: ``sram_bytes`` where set, else the Q, O, K/V and
    statistics buffers the RTL builds (O at ``acc_bits``)."""
    if hw.sram_bytes is not None:
        return hw.sram_bytes
    eb = hw.element_bytes
    acc = math.ceil(hw.acc_bits / 8)
    return (hw.tile_rows * hw.max_head_dim * (eb + acc) + hw.kv_ring_depth * hw.max_head_dim * eb
            + 3 * hw.tile_rows * 4)


def asic_area(hw: HardwareConfig) -> dict:
    """mm² by block and in total (22 nm, calibrated to the paper's Table 3)."""
    pe = hw.macs * T3_PE[0] / T3_MACS * _mac_scale(hw.data_bits)
    exp = hw.exp_lanes * T3_EXP[0] / T3_EXP_LANES
    kv_bytes = hw.kv_ring_depth * hw.max_head_dim * hw.element_bytes
    kv = T3_KV[0] * kv_bytes / T3_KV_BYTES
    cache_kb = (onchip_bytes(hw) - (kv_bytes if hw.sram_bytes is None else 0)) / 1024
    cache = T3_CACHE[0] * cache_kb / T3_CACHE_KB
    return {"pe": pe, "exp": exp, "kv": kv, "cache": cache, "total": pe + exp + kv + cache}


def sram_pj_per_byte(size_bytes: float) -> float:
    """Horowitz's SRAM access energy per byte for an array of ``size_bytes`` (log-log
    interpolation, clamped at the table's ends)."""
    xs = [math.log(s) for s, _ in SRAM_PJ_PER_64B]
    ys = [math.log(e / 8) for _, e in SRAM_PJ_PER_64B]
    return math.exp(float(np.interp(math.log(max(size_bytes, 1.0)), xs, ys)))


def energy(hw: HardwareConfig, sched) -> dict:
    """Energy of one schedule (µJ by action and in total): MACs issued (every MAC of the
    array in every issue cycle), exponentials (EXP lanes × cycles fed), SRAM bytes (per issue
    cycle: Q Kᵀ reads a Q word per line and a K word, P V a V word and reads and writes an O
    word per line; half the issue cycles each; plus the DMA's bytes into and out of the
    buffers) and DRAM bytes."""
    p, q, eb = hw.mac_lines, hw.macs_per_line, hw.element_bytes
    acc = math.ceil(hw.acc_bits / 8)
    issue = sched.busy["pe"]
    macs = issue * hw.macs
    exps = sched.busy["exp"] * hw.exp_lanes
    sram = (issue / 2 * (p * q * eb + q * eb) + issue / 2 * (q * eb + 2 * p * q * acc)
            + sched.read_bytes + sched.write_bytes)
    dram = sched.read_bytes + sched.write_bytes
    e_mac = T3_PE[1] / (T3_MACS * T3_CLOCK_GHZ) * _mac_scale(hw.data_bits)   # pJ
    e_exp = T3_EXP[1] / (T3_EXP_LANES * T3_CLOCK_GHZ)
    parts = {"mac": macs * e_mac * 1e-6, "exp": exps * e_exp * 1e-6,
             "sram": sram * sram_pj_per_byte(onchip_bytes(hw) / p) * 1e-6,
             "dram": dram * DRAM_PJ_PER_BYTE * 1e-6}
    parts["total"] = sum(parts.values())
    return parts


# ---- FPGA (ECP5) ----



# yosys maps a memory this shallow to distributed RAM (TRELLIS_DPR16X4) instead of block RAM
LUTRAM_MAX_DEPTH = 32


def dp16kd_blocks(depth: int, width: int, asked: bool = False) -> int:
    """Fewest DP16KD for one ``depth × width`` memory (0 for one shallow enough for LUTs,
    unless block RAM is ``asked`` for: ``ram_style = "block"``)."""
    if depth <= LUTRAM_MAX_DEPTH and not asked:
        return 0
    d, w = dp16kd_shape(depth, width)
    return math.ceil(depth / d) * math.ceil(width / w)


def ecp5_lut_sites(cells: dict[str, int]) -> int:
    """LUT4 sites a netlist takes, counted as nextpnr-ecp5 does before packing: the logic
    LUT4s, two per CCU2C carry cell and six per 16×4 distributed RAM (four hold its bits, two
    its write port). Counting LUT4 cells alone leaves out carry chains and RAM."""
    return (cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0)
            + 6 * cells.get("TRELLIS_DPR16X4", 0))


def _bram(hw: HardwareConfig) -> int:
    p, q = hw.mac_lines, hw.macs_per_line
    gmax, wmax, ring = hw.row_groups, hw.words_per_row, hw.ring_rows
    qbuf = p * dp16kd_blocks(gmax * wmax, q * hw.data_bits)
    obuf = p * dp16kd_blocks(gmax * wmax, q * hw.acc_bits)
    rings = 2 * hw.max_keys_per_step * dp16kd_blocks(ring * wmax, q * hw.data_bits)
    # the per-row tables table_ram puts in block RAM (hw.arith.table_ram, pbuf_ram), a bank
    # a line: the P buffer (two keys' p and O shift), m/ℓ (m: max_bits + 1) and the
    # row multipliers (at least c_m and its exponent; one block holds up to 36 bits)
    tables = 0
    if hw.table_ram != "lut":
        tables += p * dp16kd_blocks(2 * gmax, hw.exp_bits + SHIFT_BITS, asked=True)
    if hw.table_ram == "block":
        tables += p * dp16kd_blocks(gmax, hw.max_bits + 1 + hw.row_sum_bits, asked=True)
        if hw.row_scales_supported:
            tables += p * dp16kd_blocks(gmax, hw.numerics.scale_mult_bits + SCALE_EXP_BITS,
                                         asked=True)
    return qbuf + obuf + rings + tables


def _features(hw: HardwareConfig, mapper: str = "abc9") -> list[float]:
    # LUTs and FFs grow with the MACs (operand registers, products, adder trees), the lines
    # (softmax lanes, finalize, banks and their distributed m/ℓ and P tables), the word width
    # (the lanes of every word-wide path: DMA, rings, output), and a fixed controller
    # and which LUT mapper yosys ended with: its ABC fallback (after ABC9 failed on a large
    # netlist, fpga/synth.py) maps the same logic into more LUTs
    return [1.0, float(hw.macs), float(hw.mac_lines), float(hw.macs_per_line),
            1.0 if mapper == "abc" else 0.0]


def fit_fpga(points: list[dict] | None = None) -> dict:
    """Least-squares coefficients for LUT4 sites, FFs and MULT18X18D from synthesis reports
    (``points``: dicts with ``hardware`` and ``report``; default: data/fpga/synth-sweep.json)."""
    if points is None:
        points = json.loads(SWEEP_FILE.read_text())["points"] if SWEEP_FILE.exists() else []
    if len(points) < 5:
        return {}
    X = np.array([_features(HardwareConfig.from_dict(pt["hardware"]),
                            pt["report"].get("lut_mapper", "abc9")) for pt in points])
    coef = {}
    for res in ("LUT4", "TRELLIS_FF", "MULT18X18D"):
        y = np.array([ecp5_lut_sites(pt["report"]["cells"]) if res == "LUT4"
                      else pt["report"]["cells"].get(res, 0) for pt in points], dtype=float)
        coef[res] = np.linalg.lstsq(X, y, rcond=None)[0].tolist()
    return coef


_FIT: dict | None = None


def fpga_area(hw: HardwareConfig, coef: dict | None = None, mapper: str = "abc9") -> dict:
    """ECP5 resources (count and share of an LFE5U-85F) of ``hw``'s whole accelerator, as
    yosys maps it with ``mapper`` (``abc9``, or ``abc`` where ABC9 fails)."""
    global _FIT
    if coef is None:
        if _FIT is None:
            _FIT = fit_fpga()
        coef = _FIT
    f = np.array(_features(hw, mapper))
    out = {"DP16KD": float(_bram(hw))}
    for res, c in coef.items():
        out[res] = max(0.0, float(f @ np.array(c)))
    out["share"] = {k: v / FPGA_DEVICE[k] for k, v in out.items() if k in FPGA_DEVICE}
    out["fits"] = all(s <= 1.0 for s in out["share"].values())
    return out
