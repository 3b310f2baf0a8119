"""Every constraint docs/isa.md puts on an instruction's fields (``FIELD_RANGE``), stated once as
a table (:data:`FIELD_RULES`). The host's check (``contract.isa.field_error``, behind
``validate()`` and the decoder model) and the RTL decoder (hw/ctrl/decode.py) are both made
from it: each rule's ``bad`` is written with operators only, so it reads integers (the host)
and Amaranth values (the RTL) alike."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from operator import or_

from attenio.base.config import HardwareConfig
from attenio.contract.formats import SCALE_SHIFT_MAX
from attenio.contract.rules import ENTRY_BYTES

__all__ = ["FieldRule", "FIELD_RULES", "rules_for", "KPS_LOG2_MAX"]

KPS_LOG2_MAX = 7     # keys_per_step's field holds at most 2^7 (the decoder's case split)


def _pow2_above(kps, limit_log2_of) -> object:
    """``kps`` is a power of two 2^k with ``limit_log2_of(k)`` true (k = 1 … KPS_LOG2_MAX): a
    case split on kps, so neither side multiplies or shifts by a field."""
    return reduce(or_, [(kps == (1 << k)) & limit_log2_of(k)
                        for k in range(1, KPS_LOG2_MAX + 1)])


def _above_page(kps, page_log2):
    """``kps > 2^page_log2``: on integers as it reads; on the RTL's fields a case split over
    the powers of two (a non-power fails ``kps_pow2`` first), with no shift by a field."""
    if isinstance(page_log2, int) and isinstance(kps, int):
        return kps > (1 << page_log2)
    return _pow2_above(kps, lambda k: page_log2 < k)


@dataclass(frozen=True)
class FieldRule:
    """One constraint: it applies to the opcodes whose format has every field of ``fields``
    (and is one of ``ops`` when given); ``bad(f, hw, rh)`` is true when the fields ``f`` (rows ×
    heads in ``rh``) break it; ``why(f, hw, rh)`` says how, for the host's error. ``rtl``: a
    limit of this RTL's step geometry, which the model-only baselines do not have."""

    name: str
    fields: tuple[str, ...]
    bad: Callable
    why: Callable
    ops: tuple[str, ...] | None = None
    rtl: bool = False


def _row_bytes(d, hw: HardwareConfig):
    """Bytes of a row of ``d`` elements in whole words (``macs_per_line`` a power of two): a
    shift and a constant product, for both sides."""
    lq = hw.macs_per_line.bit_length() - 1
    return ((d + hw.macs_per_line - 1) >> lq) * (hw.macs_per_line * hw.element_bytes)


def _kps_lines_why(f, hw, rh):
    return (f"keys_per_step={f.keys_per_step} with {rh} rows needs rows·keys_per_step ≤ "
            f"mac_lines ({hw.mac_lines})")


def _mask_why(f, hw, rh):
    what = "causal" if f.causal else "windowed"
    return (f"{what} COMPUTE with heads > 1 and rows={f.rows} < mac_lines ({hw.mac_lines}): "
            "the mask of packed heads needs each head's rows to fill a row group, or head_pos=1 "
            "(the heads are positions)")


def _scales_rule(name: str, what: str) -> FieldRule:
    return FieldRule(
        name, (name,),
        lambda f, hw, rh: (getattr(f, name) != 0) & (not getattr(hw, f"{name}_supported")),
        lambda f, hw, rh: (f"{name}=1: a word of {hw.macs_per_line} elements cannot hold a "
                           f"{hw.scale_word_bits}-bit {what}"))


def _side_word_rules(name: str, unit: str, lacks: str, rides: str) -> tuple[FieldRule, ...]:
    """A variant whose parameters ride in each Q row's side words: ``name=1`` needs the
    config's ``unit`` and the rows' ``row_scales`` (the side words come with the multiplier)."""
    return (FieldRule(name, (name,),
                      lambda f, hw, rh: (getattr(f, name) != 0) & (not getattr(hw, unit)),
                      lambda f, hw, rh: f"{name}=1: this config {lacks} ({unit} = false)"),
            FieldRule(f"{name}_rows", (name, "row_scales"),
                      lambda f, hw, rh: (getattr(f, name) != 0) & (f.row_scales == 0),
                      lambda f, hw, rh: (f"{name}=1 with row_scales=0 ({rides}, beside the "
                                         "row's multiplier)")))


# in the order the host reports them (the first that fails names the error)
FIELD_RULES: tuple[FieldRule, ...] = (
    FieldRule("rows", ("rows",),
              lambda f, hw, rh: (rh == 0) | (rh > hw.tile_rows),
              lambda f, hw, rh: f"rows×heads={rh} outside [1, {hw.tile_rows}] (tile_rows)"),
    FieldRule("d", ("d",),
              lambda f, hw, rh: (f.d == 0) | (f.d > hw.max_head_dim),
              lambda f, hw, rh: f"d={f.d} outside [1, {hw.max_head_dim}]"),
    FieldRule("dv", ("dv",),
              lambda f, hw, rh: f.dv > hw.max_head_dim,
              lambda f, hw, rh: f"dv={f.dv} outside [0, {hw.max_head_dim}] (0: V's head dim "
                                "is d)"),
    FieldRule("keys_zero", ("keys",), lambda f, hw, rh: f.keys == 0,
              lambda f, hw, rh: "LOAD_KV with keys=0", ops=("LOAD_KV",)),
    FieldRule("keys_max", ("keys",), lambda f, hw, rh: f.keys > hw.max_seq_len,
              lambda f, hw, rh: f"keys={f.keys} above max_seq_len ({hw.max_seq_len})"),
    FieldRule("kps_range", ("keys_per_step",),
              lambda f, hw, rh: (f.keys_per_step == 0) | (f.keys_per_step > hw.ring_rows),
              lambda f, hw, rh: (f"keys_per_step={f.keys_per_step}: a power of two in [1, "
                                 f"{hw.ring_rows}] (half the K/V ring)")),
    FieldRule("kps_pow2", ("keys_per_step",),
              lambda f, hw, rh: (f.keys_per_step & (f.keys_per_step - 1)) != 0,
              lambda f, hw, rh: (f"keys_per_step={f.keys_per_step}: a power of two in [1, "
                                 f"{hw.ring_rows}] (half the K/V ring)"), rtl=True),
    FieldRule("kps_max", ("keys_per_step",),
              lambda f, hw, rh: f.keys_per_step > hw.max_keys_per_step,
              lambda f, hw, rh: (f"keys_per_step={f.keys_per_step} above max_keys_per_step "
                                 f"({hw.max_keys_per_step})"), rtl=True),
    FieldRule("kps_lines", ("keys_per_step", "rows"),
              lambda f, hw, rh: _pow2_above(f.keys_per_step,
                                            lambda k: rh > (hw.mac_lines >> k)),
              _kps_lines_why, rtl=True),
    FieldRule("page_kps", ("paged", "page_log2", "keys_per_step"),
              lambda f, hw, rh: (f.paged != 0) & _above_page(f.keys_per_step, f.page_log2),
              lambda f, hw, rh: (f"paged LOAD_KV with keys_per_step={f.keys_per_step} above "
                                 f"its page of {1 << f.page_log2} keys (a block must lie in "
                                 "one page)")),
    FieldRule("table_align", ("paged", "table"),
              lambda f, hw, rh: (f.paged != 0) & ((f.table & (ENTRY_BYTES - 1)) != 0),
              lambda f, hw, rh: (f"table={f.table} not a multiple of the entry size "
                                 f"{ENTRY_BYTES}")),
    FieldRule("v_in_k_dv", ("v_in_k", "dv", "d"),
              lambda f, hw, rh: (f.v_in_k != 0) & (f.dv > f.d),
              lambda f, hw, rh: f"v_in_k=1 with dv={f.dv} above d={f.d} (V is the first dv "
                                "elements of each K row)"),
    FieldRule("v_in_k_ring", ("v_in_k", "keys_per_step"),
              lambda f, hw, rh: (f.v_in_k != 0) & (f.keys_per_step > hw.ring_rows // 2),
              lambda f, hw, rh: (f"v_in_k=1 with keys_per_step={f.keys_per_step} above half "
                                 f"the ring ({hw.ring_rows // 2}): a K block waits for its V "
                                 "rows' slots, freed by a P V step two blocks back")),
    FieldRule("v_in_k_scales", ("v_in_k", "key_scales"),
              lambda f, hw, rh: (f.v_in_k != 0) & (f.key_scales != 0),
              lambda f, hw, rh: "v_in_k=1 with key_scales=1 (V read from K's rows takes K's "
                                "one scale; per-key factors would scale V's rows too)"),
    FieldRule("packed_mask", ("causal", "window", "heads", "rows", "head_pos"),
              lambda f, hw, rh: ((f.causal | f.window) & (f.heads > 1) & (f.rows < hw.mac_lines)
                                 & (f.head_pos == 0)),
              _mask_why),
    FieldRule("head_pos", ("head_pos", "rows"),
              lambda f, hw, rh: (f.head_pos != 0) & ((f.rows > hw.mac_lines)
                                                     | ((f.rows & (f.rows - 1)) != 0)),
              lambda f, hw, rh: (f"head_pos=1 with rows={f.rows}: a power of two in [1, "
                                 f"{hw.mac_lines}] (mac_lines; a row group then holds whole "
                                 "positions)")),
    FieldRule("select", ("select", "cont", "keys_per_step", "causal", "window", "head_pos"),
              lambda f, hw, rh: (f.select != 0) & ((f.cont == 0) | (f.keys_per_step != 1)
                                                   | (f.causal != 0) | (f.window != 0)
                                                   | (f.head_pos != 0)),
              lambda f, hw, rh: ("select=1 needs cont=1, keys_per_step=1 and no mask (causal, "
                                 f"window, head_pos 0): cont={f.cont}, keys_per_step="
                                 f"{f.keys_per_step}, causal={f.causal}, window={f.window}, "
                                 f"head_pos={f.head_pos} (a selected part continues its "
                                 "tile's rows, one row a line)")),
    FieldRule("sel_row", ("select", "sel_row", "rows"),
              lambda f, hw, rh: (f.select != 0) & (f.sel_row + f.rows > rh),
              lambda f, hw, rh: (f"select=1 with sel_row={f.sel_row}: its rows [sel_row, "
                                 f"sel_row + rows={f.rows}) must lie in the tile's {rh} rows")),
    FieldRule("c_sh", ("c_sh",), lambda f, hw, rh: f.c_sh > SCALE_SHIFT_MAX,
              lambda f, hw, rh: f"c_sh={f.c_sh} above {SCALE_SHIFT_MAX}"),
    _scales_rule("row_scales", "multiplier"),
    _scales_rule("key_scales", "K factor"),
    FieldRule("page_factors", ("paged", "key_scales", "value_scales", "keys_per_step",
                               "row_stride", "d"),
              lambda f, hw, rh: ((f.paged != 0) & ((f.key_scales | f.value_scales) != 0)
                                 & ((f.keys_per_step > hw.factors_per_word)
                                    | (f.row_stride != _row_bytes(f.d, hw)))),
              lambda f, hw, rh: (f"paged LOAD_KV with key_scales={f.key_scales}, "
                                 f"value_scales={f.value_scales}, keys_per_step="
                                 f"{f.keys_per_step} and row_stride={f.row_stride}: a page "
                                 f"packs its factors {hw.factors_per_word} to a word before "
                                 "their rows, so a block takes at most that many keys and the "
                                 f"rows lie packed ({_row_bytes(f.d, hw)} bytes)")),
    FieldRule("value_scales", ("value_scales", "paged", "v_in_k"),
              lambda f, hw, rh: (f.value_scales != 0) & ((f.paged == 0) | (f.v_in_k != 0)
                                                         | (not hw.value_scales_unit)),
              lambda f, hw, rh: (f"value_scales=1 with paged={f.paged}, v_in_k={f.v_in_k}: V "
                                 "factors lie in a paged cache's V pages (paged=1, V rows of "
                                 "their own, v_in_k=0) on a config with the unit "
                                 f"(value_scales_unit = {str(hw.value_scales_unit).lower()})")),
    FieldRule("softcap", ("softcap",),
              lambda f, hw, rh: (f.softcap != 0) & (not hw.softcap_unit),
              lambda f, hw, rh: "softcap=1: this config has no soft-capping unit "
                                "(softcap_unit = false)"),
    FieldRule("cap", ("softcap", "cap"),
              lambda f, hw, rh: (f.softcap != 0) & (f.cap == 0),
              lambda f, hw, rh: "softcap=1 with cap=0 (the cap T is at least 1)"),
    *_side_word_rules("sinks", "sinks_unit", "carries no sinks",
                      "a sink rides in its row's side word"),
    *_side_word_rules("alibi", "alibi_unit", "has no ALiBi unit",
                      "a row's ALiBi slope rides in its side words"),
)


def rules_for(op_name: str, layout, rtl: bool = True) -> list[FieldRule]:
    """The rules an opcode's format (``layout``: its field names) is checked by."""
    return [r for r in FIELD_RULES if all(n in layout for n in r.fields)
            and (r.ops is None or op_name in r.ops) and (rtl or not r.rtl)]


def check(hw: HardwareConfig, f, rh: int, op_name: str, layout, rtl: bool = True) -> str | None:
    """The first rule ``f`` breaks, as the host says it (``None``: every rule holds)."""
    for r in rules_for(op_name, layout, rtl):
        if r.bad(f, hw, rh):
            return r.why(f, hw, rh)
    return None
