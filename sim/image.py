"""The DRAM image of one run: the program from the schedule generator and the quantized Q, K,
V laid out as ``Layout.packed`` places them (rows padded to whole words of ``macs_per_line``
elements, so any head dim the config accepts runs). The RTL runner and the board self-test load
it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attenio.base.config import HardwareConfig, Workload
from attenio.base.errors import bad
from attenio.contract.formats import factor_slot, scale_word_bytes, side_word_bytes
from attenio.model.golden import GoldenInputs, multipliers
from attenio.sim.layout import Layout
from attenio.sim.plan import RunPlan, build_plan
from attenio.sim.timeline import Schedule

__all__ = ["RunImage", "run_image", "plan_for"]


@dataclass(frozen=True)
class RunImage:
    """What a host writes to DRAM before ``CTRL.START`` and what it reads back."""

    inputs: GoldenInputs
    plan: RunPlan
    program: bytes
    layout: Layout
    image: bytes
    o_bytes: int          # bytes of O the run writes at ``layout.o``
    ob: int               # bytes per output element
    row: int              # elements an O row's data occupies in DRAM (V's head dim padded to
                          # whole words)
    o_row: int            # elements an O row occupies: ``row``, plus its statistics' word (lse)

    @property
    def schedule(self) -> Schedule:
        """The plan's schedule (tilings, program, timeline)."""
        return self.plan.schedule

    def pack_output(self, o: np.ndarray) -> bytes:
        """O (batch, heads, seq_q, head_dim_v) as a run without ``lse`` writes it at
        ``layout.o``: rows padded to whole words with zeros (the hardware writes 0 there: its
        padded lanes are 0)."""
        if self.o_row != self.row:
            raise bad("lse", True, "pack_output writes O alone (a workload without lse)")
        return _order(_pack(_pad_rows(np.asarray(o), self.row), self.ob), np.shape(o)[:3],
                      self.layout.token_major)

    def _o_rows(self, raw: bytes) -> np.ndarray:
        b, h, s = np.shape(self.inputs.q)[:-1]
        rows = np.frombuffer(raw, dtype=np.uint8)
        if self.layout.token_major:         # [batch, seq_q, heads, row] in DRAM
            return rows.reshape(b, s, h, self.o_row * self.ob).transpose(0, 2, 1, 3)
        return rows.reshape(b, h, s, self.o_row * self.ob)

    def unpack_output(self, raw: bytes) -> np.ndarray:
        """The O the run wrote (``o_bytes`` read back at ``layout.o``), padding (and the
        statistics words) dropped."""
        rows = np.ascontiguousarray(self._o_rows(raw)[..., :self.row * self.ob])
        d = np.shape(self.inputs.v)[-1]                 # O has V's head dim
        return rows.view(f"<i{self.ob}").astype(np.int64)[..., :d]

    def unpack_stats(self, raw: bytes) -> np.ndarray:
        """The statistics words the run wrote after its O rows (``lse``), as bytes
        ``[batch, heads, seq_q, word bytes]`` (contract.formats.stats_of_words reads them)."""
        return self._o_rows(raw)[..., self.row * self.ob:]


def _order(data: bytes, shape: tuple[int, ...], token_major: bool) -> bytes:
    """Rows ``[batch, heads, seq_q]`` of ``data`` in the layout's order (Layout.token_major:
    position by position, a position's heads side by side)."""
    if not token_major:
        return data
    b, h, s = shape
    x = np.frombuffer(data, dtype=np.uint8).reshape(b, h, s, -1)
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).tobytes()


def _pack(x: np.ndarray, nbytes: int) -> bytes:
    return np.asarray(x, dtype=f"<i{nbytes}").tobytes()


def _pad_rows(x: np.ndarray, row: int) -> np.ndarray:
    """``x`` with its last axis padded with zeros to ``row`` elements."""
    pad = row - x.shape[-1]
    return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)]) if pad else x


def _with_words(data: bytes, words: np.ndarray, shape: tuple[int, ...], row_bytes: int) -> bytes:
    """Rows of ``row_bytes`` each followed by their word (``words``: ``shape + (bytes,)``)."""
    rows = np.frombuffer(data, dtype=np.uint8).reshape(*shape, row_bytes)
    return np.concatenate([rows, words], axis=-1).tobytes()


def _place_pages(image: bytearray, lay: Layout, wl: Workload, k_rows: bytes,
                 v_rows: bytes, pool: bool, hw: HardwareConfig, factors=None) -> None:
    """A paged cache's bytes and its block table. ``pool``: K and V rows are the pool's
    (``[kv_heads, pages · page_size, row]`` packed: the caller's cache as it lies), each page
    copied to its slot; else the workload's own rows (``[batch, kv_heads, seq_k, row]``),
    each sequence's copied page by page into the slots its table names. ``factors``: each
    K row's factor slot (``contract.formats.factor_slot``, shaped as the rows without their
    last axis) and V row's (``value_scales``), ``{"k": …, "v": …}``, each written a factor
    group to a word before the group's rows (`sim.layout.k_page_elements`)."""
    pc, page = lay.paged, wl.page_size
    rows = {}
    kv = (("k", k_rows),) + ((("v", v_rows),) if v_rows is not None else ())
    for name, data in kv:
        shape = (1, wl.kv_heads, pc.n_slots * page) if pool else (wl.batch, wl.kv_heads,
                                                                   wl.seq_k)
        rows[name] = np.frombuffer(data, dtype=np.uint8).reshape(*shape, -1)
    if pool:
        spans = [(0, s * page, (s + 1) * page, s) for s in range(pc.n_slots)]
    else:
        spans = [(seg.batch, seg.k0 + g * page, seg.k0 + min((g + 1) * page, seg.seq_k), slot)
                 for i, seg in enumerate(wl.segments()) for g, slot in enumerate(pc.slots[i])]
    wb = hw.macs_per_line * hw.element_bytes
    grp = hw.factor_group(page)
    for b, lo, hi, slot in spans:
        for name, base in (("k", lay.k), ("v", lay.v))[:len(rows)]:
            r = rows[name][b, :, lo:hi]            # [kv_heads, keys, row]
            rb = r.shape[-1]
            for h in range(wl.kv_heads):
                at = base + slot * pc.pitch + h * (pc.k_head if name == "k" else pc.v_head)
                fac = (factors or {}).get(name)
                if fac is None:
                    image[at:at + (hi - lo) * rb] = r[h].tobytes()
                    continue
                for g0 in range(0, hi - lo, grp):       # [its factors' word][its rows]
                    n = min(grp, hi - lo - g0)
                    f = fac[b, h, lo + g0:lo + g0 + n].tobytes()
                    image[at:at + len(f)] = f
                    at += wb
                    image[at:at + n * rb] = r[h, g0:g0 + n].tobytes()
                    at += n * rb
    words = lay.table_words.tobytes()
    image[lay.tables:lay.tables + len(words)] = words


def plan_for(hw: HardwareConfig, wl: Workload, inp: GoldenInputs, block_table=None,
             **kw) -> RunPlan:
    """The run plan of ``wl`` on ``inp``: its multipliers (:func:`model.golden.multipliers`)
    and the block table of a paged cache (``inp.table`` where the inputs are a pool, else
    ``block_table`` or the seeded shuffle); ``kw`` as :func:`build_plan`'s (``checked``:
    ``wl`` was checked against ``hw`` already)."""
    table = inp.table if inp.table is not None else block_table
    return build_plan(hw, wl, scale=multipliers(hw, wl, inp), block_table=table, **kw)


def run_image(hw: HardwareConfig, wl: Workload, inp: GoldenInputs, block_table=None, *,
              plan: RunPlan | None = None, checked: bool = False,
              share_prefix: bool | None = None) -> RunImage:
    """The program of ``plan`` (default :func:`plan_for` ``wl`` on ``inp``, with
    ``block_table``) and the DRAM image holding it and ``inp``'s Q, K and V. With one Q scale
    per row each Q row carries its own multiplier (``row_scales``), and with sinks its side
    words its multiplier and its head's sink (``sinks``) and ALiBi slope (``alibi``); with
    one K scale per key each K row carries its factor against twice the largest K scale
    (``key_scales``). A paged workload (``page_size``) has its K and V in pages where the
    plan's block table puts them (a pool of the caller's, ``inp.table``, as it lies) and the
    table in the image. ``share_prefix`` as :func:`build_plan`'s."""
    plan = plan if plan is not None else plan_for(hw, wl, inp, block_table, checked=checked,
                                                  share_prefix=share_prefix)
    sp, lay = plan.scale, plan.layout
    per_row, per_key = sp.per_row, sp.k_m is not None
    program = plan.program_bytes
    eb, ob = hw.element_bytes, hw.out_element_bytes
    image = bytearray(lay.end)
    image[lay.program:lay.program + len(program)] = program
    row = hw.row_elements(wl.d_qk)           # Q and K rows; V's (and O's) of their own head dim
    v_row = hw.row_elements(wl.d_v)
    kv_shape = np.shape(inp.k)[:3]
    rows = {}
    tensors = ((lay.q, inp.q), (lay.k, inp.k)) + (() if wl.v_in_k else ((lay.v, inp.v),))
    for base, x in tensors:             # (with v_in_k V is K's rows' first d_v elements)
        data = _pack(_pad_rows(np.asarray(x), v_row if base == lay.v else row), eb)
        if per_row and base == lay.q:
            shape = (wl.batch, wl.heads, wl.seq_q)
            words = (scale_word_bytes(hw, sp.c_m, sp.c_sh, shape)
                     if not sp.side_words else
                     side_word_bytes(hw, sp.c_m, sp.c_sh, shape, sink_m=sp.sink_m,
                                     sink_l=sp.sink_l, alibi_m=sp.alibi_m,
                                     alibi_sh=sp.alibi_sh, alibi_pos=sp.alibi_pos))
            data = _with_words(data, words, shape, row * eb)
        if base == lay.q:
            data = _order(data, np.shape(x)[:3], lay.token_major)
        elif per_key and base == lay.k and lay.paged is None:
            data = _with_words(data, scale_word_bytes(hw, sp.k_m, sp.k_e, kv_shape), kv_shape,
                               row * eb)
        if lay.paged is not None and base != lay.q:
            rows[base] = data
            continue
        image[base:base + len(data)] = data
    if lay.paged is not None:
        # a paged cache's K and V factors: a slot each, packed a group to a word
        slots = {n: factor_slot(hw, m_, e_).reshape(kv_shape)
                 for n, m_, e_ in (("k", sp.k_m, sp.k_e), ("v", sp.v_m, sp.v_e))
                 if m_ is not None}
        _place_pages(image, lay, wl, rows[lay.k], rows.get(lay.v), inp.table is not None,
                     hw, slots)
    return RunImage(inp, plan, program, lay, bytes(image), hw.o_bytes(wl), ob, v_row,
                    hw.o_row_elements(wl.d_v, wl.lse))
