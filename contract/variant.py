"""What an attention variant changes, stated once (:class:`Variant`): the head dims of Q·K and of
V, the softmax scale, the score transform and the softmax's initial state. Every layer reads
it from here: the workload's check (what this program format and RTL run), the float64
reference and the integer model (the scale, V's width), the closed-form traffic (K rows of
``head_dim_qk``, V and O rows of ``head_dim_v``), the program emitter and the tile loop (the
``Q Kᵀ`` and ``P V`` steps' words) and the compute core's stages (docs/architecture.md, "Where
a variant plugs in").

Today's variants: textbook attention with its own scale, ``O = softmax(scale · Q Kᵀ) V``
(``scale = 1/√head_dim_qk`` unless given), the logits soft-capped, ``s ← c·tanh(s/c)``
(Gemma 2's ``attn_logit_softcapping``: the score transform ``softcap``, a config with the
soft-capping unit), attention sinks (gpt-oss: one logit per query head in each row's
softmax denominator, with no value: the softmax's initial state, a config with
``sinks_unit``) and ALiBi (a slope per query head times the query-key distance subtracted
from the logits after the cap: a bias stage in the softmax unit, the slope and the row's
position in its side words, a config with ``alibi_unit``). The stages each touches are
named in :data:`STAGES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attenio.base.errors import bad

__all__ = ["Variant", "STAGES", "SCORE_TRANSFORMS", "variant_of"]

# the score transforms the datapath builds: the scale folded into the softmax multiplier
# (model.scales.softmax_scale, the score stage's c_m/c_sh), and soft-capping after it (the
# multiplier makes logit/c, the softmax unit's soft-capping stages c·tanh: model/variants.py,
# hw/softmax.py). ALiBi's bias follows them (its own field: it composes with either).
SCORE_TRANSFORMS = ("scale", "softcap")

# what each stage of a run reads from the variant (the list of places a new variant touches)
STAGES = {
    "score": "head_dim_qk (Q Kᵀ words), the scale (the multiplier), the score transform: "
             "model.numerics.scale, hw/score.py; the cap: model/variants.py, the softmax "
             "unit's soft-capping stages (hw/softmax.py, COMPUTE's softcap and cap); ALiBi's "
             "bias: model/variants.py alibi_biased, the score stage's distance (hw/score.py), "
             "the softmax unit's bias stage (COMPUTE's alibi, the slope in the side words)",
    "softmax": "the initial state of a row's running max and sum (m_init, ℓ = 0, or a "
               "sink's m0, ℓ0 from the row's side word): model.numerics.row_start, "
               "model/variants.py sink_state, hw/qbuf.py, hw/softmax.py",
    "pv": "head_dim_v (P V words, V rows): model.numerics.accumulate, hw/pv_stage.py",
    "finalize": "head_dim_v (O rows): model.numerics.finalize, hw/finalize_stage.py",
    "traffic": "K rows of head_dim_qk, V and O rows of head_dim_v: model/io_analysis.py",
    "program": "d (Q·K: Q and K rows, Q Kᵀ steps) and dv (V and O rows, P V steps, 0: d) "
               "(docs/isa.md): sim/program.py, sim/tile_loop.py, hw/sequencer.py, "
               "hw/ctrl/load.py",
}


@dataclass(frozen=True)
class Variant:
    """One layer's attention: Q and K rows of ``head_dim_qk`` elements, V and O rows of
    ``head_dim_v``, logits ``softmax_scale · q·k`` (``None``: ``1/√head_dim_qk``) through the
    ``score_transform`` (``softcap``: then ``softcap·tanh(logit/softcap)``), each row's
    softmax starting from ``m_init`` and ``ℓ = 0``, or with ``sinks`` (one logit per query
    head) from its head's sink, as if it were a key of its own with no value; with
    ``alibi_slopes`` (one per query head, or one for all) each logit less
    ``slope·|i + seq_k − seq_q − j|`` after the transform."""

    head_dim_qk: int
    head_dim_v: int
    softmax_scale: float | None = None
    score_transform: str = "scale"
    softcap: float | None = None
    sinks: tuple[float, ...] | None = None
    alibi_slopes: tuple[float, ...] | None = None

    def __post_init__(self):
        for name in ("head_dim_qk", "head_dim_v"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise bad(name, v, "a positive number of elements")
        s = self.softmax_scale
        if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float))
                              or not math.isfinite(s) or s <= 0):
            raise bad("softmax_scale", s, "a positive finite number (default 1/√head_dim_qk)")
        if self.score_transform not in SCORE_TRANSFORMS:
            raise bad("score_transform", self.score_transform,
                      f"choose one of: {', '.join(SCORE_TRANSFORMS)}")
        c = self.softcap
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float))
                              or not math.isfinite(c) or c <= 0):
            raise bad("softcap", c, "a positive finite cap c (logits c·tanh(s/c)), or None")
        if (c is not None) != (self.score_transform == "softcap"):
            raise bad("score_transform", self.score_transform,
                      "'softcap' exactly when a softcap is given")
        if self.sinks is not None and (not isinstance(self.sinks, tuple) or not self.sinks
                                       or not all(isinstance(x, float) and math.isfinite(x)
                                                  for x in self.sinks)):
            raise bad("sinks", self.sinks, "a non-empty tuple of finite floats, or None")
        a = self.alibi_slopes
        if a is not None and (not isinstance(a, tuple) or not a or not all(
                isinstance(x, float) and math.isfinite(x) and x >= 0 for x in a)):
            raise bad("alibi_slopes", a, "a non-empty tuple of finite floats ≥ 0, or None")

    @property
    def scale(self) -> float:
        """The logits' scale: ``softmax_scale``, or ``1/√head_dim_qk``."""
        return 1.0 / math.sqrt(self.head_dim_qk) if self.softmax_scale is None \
            else float(self.softmax_scale)

    @property
    def q_factor(self) -> float:
        """What Q's scale is multiplied by so that the softmax multiplier, worked out for
        ``1/√head_dim_qk``, applies :attr:`scale`: ``scale · √head_dim_qk`` (1 by default).
        The integers stay the same; the multiplier the hardware carries takes the factor."""
        return self.scale * math.sqrt(self.head_dim_qk)

    @property
    def textbook(self) -> bool:
        """One head dim, the default scale, no transform: the paper's attention."""
        return (self.head_dim_qk == self.head_dim_v and self.softmax_scale is None
                and self.score_transform == "scale" and self.sinks is None
                and self.alibi_slopes is None)

    def unbuilt(self) -> list[str]:
        """What of this variant the program format and the RTL do not run yet (empty: all of
        it runs). The float64 reference runs every variant. Every field of a variant here is
        built today (separate Q·K and V head dims: ``LOAD_KV.dv``, ``COMPUTE.dv``); V read from
        K's own rows (MLA's absorbed decode) is a workload's layout, not a field here."""
        return []


def variant_of(wl, softmax_scale: float | None = None,
               softcap: float | None = None, sinks=None, alibi_slopes=None) -> Variant:
    """The variant a workload asks for (its head dims), with ``softmax_scale``, the cap
    ``softcap``, the ``sinks`` and the ALiBi ``alibi_slopes`` (each a number, or one per query
    head) if given (NumPy scalars taken as floats)."""
    def num(x):
        return float(x) if isinstance(x, np.floating) else x
    def floats(name, x):
        if x is None:
            return None
        try:
            return tuple(float(v) for v in np.asarray(x, dtype=np.float64).reshape(-1))
        except (TypeError, ValueError):
            raise bad(name, x, "a number or one number per query head") from None
    return Variant(wl.d_qk, wl.d_v, num(softmax_scale),
                   "scale" if softcap is None else "softcap", num(softcap),
                   floats("sinks", sinks), floats("alibi_slopes", alibi_slopes))
