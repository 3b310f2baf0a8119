"""The one configuration that drives the RTL, schedule generator, golden models and tests.

Three frozen, keyword-only dataclasses:

* :class:`Numerics`: the fixed-point formats of the softmax datapath (docs/numerics.md);
* :class:`HardwareConfig`: the accelerator instance (array, buffers, DRAM model, numerics);
* :class:`Workload`: one attention problem (lengths, head dim, heads, batch, causal), and
  :class:`VarlenWorkload`, sequences of different lengths packed together (base/workload.py).

Every field is validated in ``__post_init__``; a bad value raises :class:`ConfigError` (a
``ValueError``) naming the field, the value and the valid range. Every datapath width is a
derived property, with its derivation beside it, so the RTL, the integer model and the
testbench cannot disagree on one. Variants are made with :func:`dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from attenio.base.errors import ConfigError, bad
from attenio.base.fields import Serializable, check_bool, check_float, check_int, is_pow2
from attenio.base.workload import VarlenWorkload, Workload

__all__ = ["Numerics", "HardwareConfig", "Workload", "VarlenWorkload", "PRESETS", "preset",
           "ConfigError"]

SUPPORTED_DATA_BITS = (8, 16)
SUPPORTED_AXI_BITS = (32, 64, 128, 256, 512, 1024)
# The integer model runs on int64 and does its matrix products in float64, which is exact
# while every partial sum stays below 2**53; widths beyond these are refused up front.
_INT64_BITS = 63
# A scale word's exponent field (c_sh of a Q row, k_e of a K row): shifts up to 62 fit in 6 bits.
SCALE_EXP_BITS = 6
TABLE_RAMS = ("lut", "block", "pbuf-block")     # HardwareConfig.table_ram
# A K row's factor k_m keeps this many significant bits (its top bits; the rest are zero): c_m·k_m
# is exact (docs/numerics.md, "Per-key K scales"; a rounded product broke the contract on large
# logits, issue #33), and off the DSPs (a 4-bit piece and the implicit leading one).
KEY_MANT_BITS = 5
# a K factor's slot in a paged cache's factor word: k_hi, then k_e (docs/isa.md, "Paged K/V")
FACTOR_SLOT_BITS = 16
# An attention sink's running-max start m0 = floor(sink·log2(e)) in a Q row's side word:
# signed, so sinks of |sink| < 2**(SINK_M_BITS-1)·ln 2 ≈ 354 nats (docs/numerics.md, "Sinks").
SINK_M_BITS = 10
_FLOAT_EXACT_BITS = 53


@dataclass(frozen=True, kw_only=True)
class Numerics(Serializable):
    """Fixed-point formats of the softmax datapath (the contract of docs/numerics.md).

    Parameters
    ----------
    logit_frac_bits
        F: fraction bits of the base-2 logit ``t = s * log2(e) * scale``.
    exp_frac_bits
        PF: fraction bits of ``p = 2**(t - m)``; p is unsigned with PF+1 bits, in [0, 2).
    exp_segments_log2
        The exp2 unit's piecewise-linear table has ``2**exp_segments_log2`` segments.
    scale_mult_bits
        CM: width of the unsigned softmax-scale multiplier ``c_m``.
    recip_seed_log2
        The reciprocal's seed table has ``2**recip_seed_log2`` entries.
    recip_frac_bits
        RF: fraction bits of the normalized mantissa of ℓ and of its reciprocal.
    out_frac_bits
        OF: fraction bits of the output, in units of V's LSB.
    finalize_guard_bits
        G: bits of O kept below ℓ's leading one before the output multiply.
    """

    logit_frac_bits: int = 14
    exp_frac_bits: int = 16
    exp_segments_log2: int = 5
    scale_mult_bits: int = 16
    recip_seed_log2: int = 6
    recip_frac_bits: int = 20
    out_frac_bits: int = 8
    finalize_guard_bits: int = 14

    def __post_init__(self):
        check_int(self, "logit_frac_bits", 6, 20)
        check_int(self, "exp_frac_bits", 8, 24)
        check_int(self, "exp_segments_log2", 1, 8)
        if self.exp_segments_log2 >= self.logit_frac_bits:
            raise bad("exp_segments_log2", self.exp_segments_log2,
                      f"must be below logit_frac_bits={self.logit_frac_bits}")
        check_int(self, "scale_mult_bits", 8, 24)
        check_int(self, "recip_seed_log2", 2, 10)
        check_int(self, "recip_frac_bits", 12, 24)
        if self.recip_seed_log2 >= self.recip_frac_bits:
            raise bad("recip_seed_log2", self.recip_seed_log2,
                      f"must be below recip_frac_bits={self.recip_frac_bits}")
        check_int(self, "out_frac_bits", 0, 16)
        check_int(self, "finalize_guard_bits", 1, 24)
        if self.finalize_guard_bits <= self.out_frac_bits:
            raise bad("finalize_guard_bits", self.finalize_guard_bits,
                      f"must exceed out_frac_bits={self.out_frac_bits} so the output keeps its "
                      "rounding bit")

    @property
    def exp_bits(self) -> int:
        # p = 2**frac >> shift with frac in [1, 2): PF fraction bits and one integer bit.
        return self.exp_frac_bits + 1


@dataclass(frozen=True, kw_only=True)
class HardwareConfig(Serializable):
    """One accelerator instance.

    Parameters
    ----------
    mac_lines, macs_per_line
        The PE array is ``mac_lines × macs_per_line`` MACs (the paper's p × q).
    data_bits
        Width of the signed Q, K and V elements (8 or 16).
    tile_rows
        Capacity of the resident Q tile and O accumulator, in query rows.
    max_head_dim
        Largest head dimension d the buffers hold (columns of Q and O).
    kv_ring_depth
        Depth of the K/V row ring the DMA fills ahead of the PE array, in rows.
    exp_lanes
        Exponentials the softmax unit computes per cycle.
    axi_data_bits
        Width of the AXI4 data bus.
    dram_latency
        DRAM model: cycles from a read request to its first beat.
    dram_bytes_per_cycle
        DRAM model: sustained bytes per cycle.
    clock_mhz
        Clock frequency used to turn cycles into time.
    max_seq_len
        Longest query or key sequence; sizes ℓ and the O accumulator so they cannot overflow.
    max_keys_per_step
        Most keys the PE array takes per step when a tile has fewer rows than MAC lines (a power
        of two, at most ``mac_lines`` and half the K/V ring). The RTL builds chains and routing
        for this many; 1 builds none.
    softmax_block
        Keys that share one running-max update. The integer model and the RTL both group keys
        into aligned blocks of this many (from key 0), so results do not depend on tiling.
    sram_bytes
        Unified on-chip memory budget M in bytes as the paper's Eq. 14 counts it, for
        model-only presets; ``None`` means the physical buffers above define the memory.
    table_ram
        Where the small per-row tables live (the m/ℓ table, the P buffer, the Q scale table):
        ``"lut"`` asks synthesis for distributed RAM (keeps block RAM for the O and Q buffers),
        ``"block"`` for block RAM (gives LUTs back to routing), ``"pbuf-block"`` for the P buffer
        alone (its deepest: a block RAM a bank). Cycles never differ, only the FPGA mapping.
    obuf_slices
        Each O bank as memories one block RAM wide, an address register each (base/ecp5.py,
        ``obuf_slice_bits``): the same block RAMs, cycles and bits; only the FPGA mapping.
    softcap_unit
        Build the logit soft-capping unit (``c·tanh(logit/c)``, Gemma 2) in the softmax
        pipeline: runs may then set a cap. It adds its stages to the softmax's latency
        (``contract.timing.timing_for``), whether a run caps or not; throughput is unchanged.
    sinks_unit
        Let each Q row carry an attention sink (gpt-oss: a learned logit per query head in the
        softmax's denominator, with no value): the row's side word(s) hold its multiplier and
        the sink's start of the running max and sum, which the softmax takes instead of its
        reset at a tile's first key. It widens the Q multiplier table; no latency, no cycles.
    alibi_unit
        Build the ALiBi unit (a per-head slope times the query-key distance subtracted from
        the logits, FlashAttention's ``alibi_slopes``): each Q row's side words carry its
        head's slope, and the softmax pipeline subtracts ``slope·|i + diag − j|`` after the
        scale (and the cap). It adds ``ALIBI_LATENCY`` stages to the softmax's latency
        (``contract.timing.timing_for``), whether a run uses it or not; throughput is
        unchanged.
    value_scales_unit
        Let a paged cache's V pages carry a factor per key (``LOAD_KV.value_scales``): the ring
        keeps V's factors as K's and the ``P V`` stage multiplies each key's p by its factor
        (between the P buffer and the array's operands; no cycle). Needs a word that holds a
        factor (:attr:`key_scales_supported`).
    numerics
        Fixed-point formats, see :class:`Numerics`.
    """

    mac_lines: int
    macs_per_line: int
    data_bits: int = 8
    tile_rows: int
    max_head_dim: int
    kv_ring_depth: int = 8
    exp_lanes: int = 4
    axi_data_bits: int = 64
    dram_latency: int = 100
    dram_bytes_per_cycle: int = 8
    clock_mhz: float = 100.0
    max_seq_len: int = 65536
    softmax_block: int = 1
    max_keys_per_step: int = 1
    sram_bytes: int | None = None
    table_ram: str = "lut"
    obuf_slices: bool = False
    softcap_unit: bool = False
    sinks_unit: bool = False
    alibi_unit: bool = False
    value_scales_unit: bool = False
    numerics: Numerics = field(default_factory=Numerics)

    NESTED: ClassVar[dict[str, type]] = {"numerics": Numerics}

    def __post_init__(self):
        check_int(self, "mac_lines", 1, 4096)
        check_int(self, "macs_per_line", 1, 4096)
        if self.data_bits not in SUPPORTED_DATA_BITS or isinstance(self.data_bits, bool):
            raise bad("data_bits", self.data_bits, f"supported: {SUPPORTED_DATA_BITS}")
        check_int(self, "tile_rows", 1, 1 << 16)
        check_int(self, "max_head_dim", 1, 1024)
        check_int(self, "kv_ring_depth", 2, 1 << 16)
        check_int(self, "exp_lanes", 1, 4096)
        if self.axi_data_bits not in SUPPORTED_AXI_BITS or isinstance(self.axi_data_bits, bool):
            raise bad("axi_data_bits", self.axi_data_bits, f"supported: {SUPPORTED_AXI_BITS}")
        check_int(self, "dram_latency", 0, 1 << 20)
        check_int(self, "dram_bytes_per_cycle", 1, 1 << 16)
        check_float(self, "clock_mhz", 0.0, 1e5)
        check_int(self, "max_seq_len", 1, 1 << 24)
        check_int(self, "softmax_block", 1, 1024)
        if self.softmax_block > self.max_seq_len:
            raise bad("softmax_block", self.softmax_block,
                      f"must not exceed max_seq_len={self.max_seq_len}")
        check_int(self, "max_keys_per_step", 1, 4096)
        kmax = min(self.mac_lines, self.ring_rows)
        if not is_pow2(self.max_keys_per_step) or self.max_keys_per_step > kmax:
            raise bad("max_keys_per_step", self.max_keys_per_step,
                      f"must be a power of two ≤ min(mac_lines, kv_ring_depth/2) = {kmax}")
        if self.sram_bytes is not None:
            check_int(self, "sram_bytes", 1, 1 << 40)
        if self.table_ram not in TABLE_RAMS:
            raise bad("table_ram", self.table_ram, f"choose one of: {', '.join(TABLE_RAMS)}")
        for f in ("obuf_slices", "softcap_unit", "sinks_unit", "alibi_unit", "value_scales_unit"):
            check_bool(self, f)
        if self.value_scales_unit and not self.key_scales_supported:
            raise bad("value_scales_unit", True, f"a word of {self.macs_per_line} elements "
                      "cannot hold a factor")
        if not isinstance(self.numerics, Numerics):
            raise bad("numerics", self.numerics, "must be a Numerics instance")
        # Widths the integer model (int64, float64-exact products) and the RTL can carry.
        if self.logit_product_bits > _INT64_BITS:
            raise bad("max_head_dim", self.max_head_dim,
                      f"the scaled score would need {self.logit_product_bits} bits "
                      f"(at most {_INT64_BITS}) with data_bits={self.data_bits}")
        if self.acc_bits > _FLOAT_EXACT_BITS:
            raise bad("max_seq_len", self.max_seq_len,
                      f"the O accumulator would need {self.acc_bits} bits (at most "
                      f"{_FLOAT_EXACT_BITS}) with data_bits={self.data_bits}; lower max_seq_len")

    # ---- RTL support -------------------------------------------------------------------------
    def rtl_problems(self) -> list[tuple[str, Any, str]]:
        """What this RTL cannot build from this config, as ``(field, value, why)`` (empty when
        it can). The models price any valid config (``asplos26`` is model-only); the hardware
        generator, ``attenio synth`` and ``attenio config show`` apply these rules."""
        out = []
        for name in ("mac_lines", "macs_per_line"):
            if not is_pow2(getattr(self, name)):
                out.append((name, getattr(self, name), "this RTL needs a power of two"))
        if self.softmax_block != 1:
            out.append(("softmax_block", self.softmax_block,
                        "this RTL updates the running max every key (softmax_block = 1)"))
        if self.exp_lanes != self.mac_lines:
            why = (f"this RTL needs exp_lanes == mac_lines ({self.mac_lines}): one softmax "
                   "lane per MAC line")
            out.append(("exp_lanes", self.exp_lanes, why))
        return out

    def rtl_reason(self) -> str:
        """:meth:`rtl_problems` as one line (empty when the RTL builds this config)."""
        return "; ".join(f"{f}={v}: {why}" for f, v, why in self.rtl_problems())

    def check_rtl(self) -> None:
        """Raise :class:`ConfigError` naming the first field this RTL cannot build
        (:meth:`rtl_problems`)."""
        for name, value, why in self.rtl_problems():
            raise bad(name, value, why)

    # ---- sizes and derived geometry (every layer reads these; none restates them) ------------
    @property
    def macs(self) -> int:
        return self.mac_lines * self.macs_per_line

    @property
    def ring_rows(self) -> int:
        """Rows of half the K/V ring: the K (or V) rows the loader may hold ahead of the PE
        array, so also the most keys one step can take."""
        return max(1, self.kv_ring_depth // 2)

    @property
    def row_groups(self) -> int:
        """Row groups of a full tile: ``⌈tile_rows / mac_lines⌉`` (the PE array takes one group
        of ``mac_lines`` rows at a time)."""
        return -(-self.tile_rows // self.mac_lines)

    def words(self, d: int) -> int:
        """Words of ``macs_per_line`` elements in a row of ``d``: ``⌈d / macs_per_line⌉``."""
        return -(-d // self.macs_per_line)

    @property
    def words_per_row(self) -> int:
        """Words in the longest row the buffers hold: :meth:`words` of ``max_head_dim``."""
        return self.words(self.max_head_dim)

    @property
    def out_element_bytes(self) -> int:
        """Bytes of one output element as the DMA writes it (``out_bits`` rounded up)."""
        return -(-self.out_bits // 8)

    @property
    def scale_word_bits(self) -> int:
        """Bits of a scale word (a Q row's multiplier or a K row's factor): the mantissa in the
        low ``scale_mult_bits``, the exponent in the :data:`SCALE_EXP_BITS` above."""
        return self.numerics.scale_mult_bits + SCALE_EXP_BITS

    @property
    def scale_factor_bits(self) -> int:
        """Bits of the multiplier that meets a score: ``c_m`` (``scale_mult_bits``), or with
        per-key factors possible ``c_m·k_hi``, exact (:data:`KEY_MANT_BITS` more)."""
        cm = self.numerics.scale_mult_bits
        return cm + KEY_MANT_BITS if self.key_scales_supported else cm

    @property
    def element_bytes(self) -> int:
        return self.data_bits // 8

    @property
    def axi_data_bytes(self) -> int:
        return self.axi_data_bits // 8

    def row_elements(self, d: int) -> int:
        """Elements a row of ``d`` occupies in DRAM: whole words of ``macs_per_line`` (the DMA
        moves rows as words; the host pads the last one, the hardware ignores the padding)."""
        return self.words(d) * self.macs_per_line

    @property
    def row_scales_supported(self) -> bool:
        """A Q row can carry its own softmax multiplier: one word holds ``c_m`` and ``c_sh``
        (``LOAD_Q.row_scales``; docs/isa.md)."""
        return self.macs_per_line * self.data_bits >= self.scale_word_bits

    @property
    def key_scales_supported(self) -> bool:
        """A K row can carry its own scale factor: one word holds ``k_m`` and ``k_e``
        (``LOAD_KV.key_scales``; docs/isa.md)."""
        return self.row_scales_supported

    @property
    def factors_per_word(self) -> int:
        """K factors a word holds in a paged cache: a FACTOR_SLOT_BITS slot each, at least 1."""
        return max(1, self.macs_per_line * self.data_bits // FACTOR_SLOT_BITS)

    def factor_group(self, page_size: int) -> int:
        """K rows whose factors share a word in a paged cache: at most a page (it lies in it)."""
        return min(self.factors_per_word, page_size)

    def k_row_elements(self, d: int, key_scales: bool = False) -> int:
        """Elements a K row occupies in DRAM: :meth:`row_elements`, plus one word holding the
        key's factor with ``key_scales`` (V rows have none)."""
        return self.row_elements(d) + (self.macs_per_line if key_scales else 0)

    def v_row_stride(self, row_stride: int, key_scales: bool = False, d: int | None = None,
                     d_v: int | None = None) -> int:
        """V's row stride in bytes for a ``LOAD_KV`` of ``row_stride`` (K's): V rows lie as K
        rows do, less the difference of their pitches: a word less with ``key_scales`` (V rows
        carry no factor) and, with a V head dim ``d_v`` of its own, the words of ``d`` it
        lacks, so packed K and packed V are both contiguous (docs/isa.md, ``LOAD_KV.dv``)."""
        narrower = 0 if d is None or d_v is None else self.row_elements(d) - self.row_elements(d_v)
        return row_stride - ((self.macs_per_line if key_scales else 0) + narrower) \
            * self.element_bytes

    def o_bytes(self, wl: Workload) -> int:
        """Bytes of ``wl``'s whole output as the DMA stores it: every row padded to whole words,
        ``out_element_bytes`` an element, with its statistics' word after it with ``lse``."""
        return wl.batch * wl.heads * wl.seq_q * self.o_row_elements(wl.d_v, wl.lse) \
            * self.out_element_bytes

    def o_row_elements(self, d: int, lse: bool = False) -> int:
        """Elements an O row occupies in DRAM: :meth:`row_elements`, plus one word holding
        the row's softmax statistics (``m``, ``ℓ``) with ``lse`` (docs/isa.md)."""
        return self.row_elements(d) + (self.macs_per_line if lse else 0)

    @property
    def sink_word_bits(self) -> int:
        """Bits of a Q row's side data with a sink: the multiplier (:attr:`scale_word_bits`),
        the sink's running-max start (:data:`SINK_M_BITS`, signed) and its row-sum start
        (``exp_bits``), in that order from bit 0 (docs/isa.md, ``LOAD_Q.sinks``)."""
        return self.scale_word_bits + SINK_M_BITS + self.exp_bits

    @property
    def side_word_bits(self) -> int:
        """Bits of a Q row's full side data (``LOAD_Q.sinks`` or ``LOAD_Q.alibi``): the
        multiplier (:attr:`scale_word_bits`), with ``sinks_unit`` the sink's fields
        (:attr:`sink_word_bits`), with ``alibi_unit`` the ALiBi slope's word (a scale word:
        mantissa and shift) and the row's position in its sequence (``max_seq_len``'s bit
        length) above them, in that order from bit 0 (docs/isa.md)."""
        bits = self.sink_word_bits if self.sinks_unit else self.scale_word_bits
        return bits + (self.scale_word_bits + self.position_bits if self.alibi_unit else 0)

    @property
    def position_bits(self) -> int:
        """Bits of a position in a sequence, and of ALiBi's distance ``|i + diag − j|``:
        both below ``max_seq_len`` for every row and key of a sequence."""
        return self.max_seq_len.bit_length()

    def q_side_words(self, row_scales: bool = False, sinks: bool = False) -> int:
        """Words after a Q row: none; one holding its multiplier (``row_scales``); with
        ``sinks`` (the row's full side data: its sink and/or its ALiBi slope) as many as hold
        :attr:`side_word_bits` (one word from 49 bits up with sinks: two on tiny's 32-bit
        words; three with sinks and ALiBi there)."""
        if sinks:
            wb = self.macs_per_line * self.data_bits
            return -(-self.side_word_bits // wb)
        return 1 if row_scales else 0

    def q_row_elements(self, d: int, row_scales: bool = False, sinks: bool = False) -> int:
        """Elements a Q row occupies in DRAM: :meth:`row_elements`, plus its side words
        (:meth:`q_side_words`: its multiplier with ``row_scales``, and its sink)."""
        return self.row_elements(d) + self.macs_per_line * self.q_side_words(row_scales, sinks)

    # ---- datapath widths (docs/numerics.md derives each) ---------------------------------------
    @property
    def score_bits(self) -> int:
        # s = Σ_k q_k·k_k over d ≤ max_head_dim terms; the largest magnitude is
        # d·(2**(B-1))**2, reached only by (-2**(B-1))**2 products, so it needs one bit over
        # its own bit length to be a signed value.
        return (self.max_head_dim << (2 * self.data_bits - 2)).bit_length() + 1

    @property
    def logit_product_bits(self) -> int:
        # s · c with c < 2**scale_factor_bits unsigned: |s·c| < 2**(score_bits-1) · 2**bits.
        return self.score_bits + self.scale_factor_bits

    @property
    def logit_bits(self) -> int:
        # t = round(s·c_m / 2**c_sh) with c_sh ≥ 0, so t is never wider than s·c_m; with a
        # key's factor, c_m·k_hi < 2**(CM + KEY_MANT_BITS) meets a shift of at least
        # KEY_MANT_BITS, so the same bound holds.
        return self.score_bits + self.numerics.scale_mult_bits

    @property
    def max_bits(self) -> int:
        # m = floor(t / 2**F): the integer part of the logit.
        return self.logit_bits - self.numerics.logit_frac_bits

    @property
    def exp_bits(self) -> int:
        return self.numerics.exp_bits

    @property
    def row_sum_bits(self) -> int:
        # ℓ_new = (ℓ >> sh) + Σ_block p with p < 2**(PF+1): by induction over keys,
        # ℓ < keys·2**(PF+1) ≤ max_seq_len·2**(PF+1) (unsigned).
        return (self.max_seq_len << self.exp_bits).bit_length()

    @property
    def pv_bits(self) -> int:
        # p·v: unsigned PF+1 bits times signed B bits.
        return self.exp_bits + self.data_bits

    @property
    def acc_bits(self) -> int:
        # |O| ≤ keys·p_max·|v|_max, and an arithmetic right shift never grows |O| (|-1 >> s| = 1),
        # so |O| ≤ max_seq_len·(2**(PF+1)-1)·2**(B-1): that magnitude's bit length plus a sign.
        vmax = 1 << (self.data_bits - 1)
        return (self.max_seq_len * ((1 << self.exp_bits) - 1) * vmax).bit_length() + 1

    @property
    def recip_bits(self) -> int:
        # r ≈ 2**RF / mantissa with mantissa in [1, 2): at most 2**RF, so RF+1 bits unsigned.
        return self.numerics.recip_frac_bits + 1

    @property
    def out_bits(self) -> int:
        # O/ℓ is a convex combination of V, so it fits V's range with OF more fraction bits
        # (saturated, since independent floors of O and ℓ can step just outside it).
        return self.data_bits + self.numerics.out_frac_bits

    def widths(self) -> dict[str, int]:
        """Every derived datapath width, by name (for reports, the RTL and docs)."""
        return {
            "score_bits": self.score_bits,
            "logit_bits": self.logit_bits,
            "max_bits": self.max_bits,
            "exp_bits": self.exp_bits,
            "row_sum_bits": self.row_sum_bits,
            "pv_bits": self.pv_bits,
            "acc_bits": self.acc_bits,
            "recip_bits": self.recip_bits,
            "out_bits": self.out_bits,
        }

    def check_workload(self, wl: Workload | VarlenWorkload) -> None:
        """Raise :class:`ConfigError` if ``wl`` does not fit this hardware (for a varlen batch,
        naming the sequence that does not)."""
        if not isinstance(wl, (Workload, VarlenWorkload)):
            raise bad("workload", wl, "must be a Workload or a VarlenWorkload")
        if wl.head_dim > self.max_head_dim:
            raise bad("head_dim", wl.head_dim, f"must be in [1, {self.max_head_dim}] "
                      f"(max_head_dim of this hardware)")
        if wl.d_v > self.max_head_dim:
            raise bad("head_dim_v", wl.d_v, f"must be in [1, {self.max_head_dim}] "
                      f"(max_head_dim of this hardware)")
        if isinstance(wl, VarlenWorkload):
            lengths = [(f"seqlens_{s}[{i}]", n) for s in "qk"
                       for i, n in enumerate(getattr(wl, f"seqlens_{s}"))]
        else:
            lengths = [(name, getattr(wl, name)) for name in ("seq_q", "seq_k")]
        for name, n in lengths:
            if n > self.max_seq_len:
                raise bad(name, n,
                          f"must be in [1, {self.max_seq_len}] (max_seq_len of this hardware)")
        if wl.lse and not self.lse_supported:
            raise bad("lse", True, f"this hardware's output word ({self.macs_per_line} x "
                      f"{self.out_bits} bits) cannot hold a row's m and ℓ "
                      f"({self.max_bits + 1} and {self.row_sum_bits} bits, one per half)")

    @property
    def lse_supported(self) -> bool:
        """An output word holds a row's statistics: ``ℓ`` in one half, ``m`` in the other
        (``STORE_O.lse``; contract.formats.stats_word_bytes)."""
        half = self.stats_half_bits
        return self.row_sum_bits <= half and self.max_bits + 1 <= half

    @property
    def stats_half_bits(self) -> int:
        """Bits of each half of a statistics word (one output word): ℓ in the low half, m in
        the high one."""
        return self.macs_per_line * self.out_bits // 2


# ---- presets (brief §6) ----

def tiny() -> HardwareConfig:
    """4×4 MACs, int8, 64-row tile, d ≤ 64: fast cocotb tests. The AXI bus is 32 bits so one
    beat is one core word (4 int8 elements), as on the fpga preset (8 × int8 = 64 bits)."""
    return HardwareConfig(
        mac_lines=4, macs_per_line=4, data_bits=8, tile_rows=64, max_head_dim=64,
        kv_ring_depth=8, exp_lanes=4, axi_data_bits=32, dram_latency=20,
        dram_bytes_per_cycle=4, clock_mhz=100.0, max_seq_len=4096, softmax_block=1,
        max_keys_per_step=4)


def fpga() -> HardwareConfig:
    """4×8 MACs, int8, 256-row tile, d ≤ 128: an ECP5-85F (ULX3S) or a small Xilinx part.

    The brief's tile was 512 rows; its O buffer alone kept block RAM above 80% of the
    LFE5U-85F under the accuracy contract (docs/fpga.md), so the preset is the 256-row tile
    (the traffic of K/V doubles: 8.5 against 4.5 times the compulsory 4Nd at N = 4096). Four
    lines of 8 MACs (one 64-bit K/V word a beat) is the largest array that routes with the
    WebAssembly nextpnr (issue #31: 8 × 8 and 8 × 4 place but do not route; docs/fpga.md); the
    8 × 8 array is configs/fpga-8x8.toml. Its P buffer is block RAM (``table_ram``)."""
    return HardwareConfig(
        mac_lines=4, macs_per_line=8, data_bits=8, tile_rows=256, max_head_dim=128,
        kv_ring_depth=16, exp_lanes=4, axi_data_bits=64, dram_latency=100,
        dram_bytes_per_cycle=8, clock_mhz=100.0, max_seq_len=65536, softmax_block=1,
        max_keys_per_step=1, table_ram="pbuf-block", obuf_slices=True)


def asplos26() -> HardwareConfig:
    """The paper's Table 2 (model only): 64×32 MACs and 128 EXP units at 1 GHz, 512 KB on
    chip, 2-byte elements, 128 GB/s HBM (128 B/cycle). Outputs carry 8 fraction bits below
    V's LSB (24 bits, written as 3 bytes): the paper's O is FP16, but a 16-bit fixed-point O
    loses relative accuracy as outputs shrink like 1/√N (at N = 16384 it was 7.7× worse than
    fp16 attention; with 8 fraction bits it is 4.5× better: docs/numerics.md)."""
    return HardwareConfig(
        mac_lines=64, macs_per_line=32, data_bits=16, tile_rows=8192, max_head_dim=256,
        kv_ring_depth=64, exp_lanes=128, axi_data_bits=1024, dram_latency=100,
        dram_bytes_per_cycle=128, clock_mhz=1000.0, max_seq_len=1 << 20, softmax_block=1,
        max_keys_per_step=32, sram_bytes=512 * 1024, numerics=Numerics(out_frac_bits=8))


PRESETS = {"tiny": tiny, "fpga": fpga, "asplos26": asplos26}


# what a preset's name may add after a "+": the units a variant needs (``fpga+softcap``)
PRESET_UNITS = {"softcap": "softcap_unit", "sinks": "sinks_unit", "alibi": "alibi_unit",
                "vscales": "value_scales_unit"}


def preset(name: str) -> HardwareConfig:
    """Return the named preset, with the units its ``+unit`` suffixes name
    (:data:`PRESET_UNITS`: ``fpga+softcap`` is fpga with the soft-capping unit); raise
    :class:`ConfigError` for an unknown name or unit."""
    base, *units = name.split("+") if isinstance(name, str) else (name,)
    try:
        hw = PRESETS[base]()
    except (KeyError, TypeError):
        raise bad("preset", name, f"known presets: {', '.join(PRESETS)}, each with "
                  f"+{'/+'.join(PRESET_UNITS)} for the unit of that name") from None
    for u in units:
        if u not in PRESET_UNITS:
            raise bad("preset", name, f"units after '+': {', '.join(PRESET_UNITS)}")
        hw = replace(hw, **{PRESET_UNITS[u]: True})
    return hw


def replace(obj, **changes):
    """:func:`dataclasses.replace`, re-running validation (re-exported for convenience)."""
    return dataclasses.replace(obj, **changes)
