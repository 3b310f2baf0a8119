"""Payload layouts of the compute core's ports (hw/core.py) and their producers."""

from __future__ import annotations

from amaranth import Mux, signed, unsigned
from amaranth.lib import data

from attenio.base.config import SCALE_EXP_BITS, SINK_M_BITS, HardwareConfig
from attenio.contract.formats import SOFTCAP_CAP_BITS

__all__ = ["word_layout", "qcmd_layout", "kv_beat_layout", "cmd_layout", "kps_bits",
           "row_scale_layout", "q_side_layout", "q_side_words", "sink_layout",
           "alibi_layout", "rel_bits"]


def word_layout(cfg: HardwareConfig) -> data.ArrayLayout:
    """q elements of Q, K or V: one memory word and one stream beat."""
    return data.ArrayLayout(signed(cfg.data_bits), cfg.macs_per_line)


def kps_bits(cfg: HardwareConfig) -> int:
    """Bits of log2(keys per step)."""
    return max(1, (cfg.max_keys_per_step.bit_length() - 1).bit_length())


def qcmd_layout(cfg: HardwareConfig) -> data.StructLayout:
    """What the Q loader needs (from ``LOAD_Q``): rows, head dim, log2 keys per step, and
    whether each row is followed by its multiplier's word (``row_scales``)."""
    return data.StructLayout({
        "rows": unsigned((cfg.tile_rows).bit_length()),
        "d": unsigned((cfg.max_head_dim).bit_length()),
        "kps_log2": unsigned(kps_bits(cfg)),
        "row_scales": unsigned(1),
        # each row's side words hold its sink too (cfg.sinks_unit): more words a row
        "sinks": unsigned(1),
        # each row's side words hold its ALiBi slope (cfg.alibi_unit): likewise
        "alibi": unsigned(1),
    })


def q_side_layout(cfg: HardwareConfig) -> data.StructLayout:
    """What the Q buffer keeps of a row's side words: its multiplier (``row_scale_layout``)
    and, with ``sinks_unit``, its sink's start of the running max and the row sum, with
    ``alibi_unit`` its ALiBi slope's word (the bits above, in that order,
    contract.formats.side_word_bytes)."""
    if not (cfg.sinks_unit or cfg.alibi_unit):
        return row_scale_layout(cfg)
    fields = {"c_m": unsigned(cfg.numerics.scale_mult_bits), "c_sh": unsigned(SCALE_EXP_BITS)}
    if cfg.sinks_unit:
        fields.update(sink_m=signed(SINK_M_BITS), sink_l=unsigned(cfg.exp_bits))
    if cfg.alibi_unit:
        fields.update(alibi_m=unsigned(cfg.numerics.scale_mult_bits),
                      alibi_sh=unsigned(SCALE_EXP_BITS), alibi_pos=unsigned(rel_bits(cfg)))
    return data.StructLayout(fields)


def q_side_words(cfg: HardwareConfig, q):
    """Words after a Q row, from its ``LOAD_Q`` or the Q loader's command ``q``
    (``HardwareConfig.q_side_words``): its multiplier's with ``row_scales``, its side words
    with ``sinks`` or ``alibi`` (a config with ``sinks_unit`` or ``alibi_unit``; the decoder
    refuses the bit elsewhere)."""
    full = [q.sinks] if cfg.sinks_unit else []
    full += [q.alibi] if cfg.alibi_unit else []
    if not full:
        return q.row_scales
    on = full[0] if len(full) == 1 else full[0] | full[1]
    return Mux(on, cfg.q_side_words(True, True), q.row_scales)


def rel_bits(cfg: HardwareConfig) -> int:
    """Bits of ALiBi's distance ``|i + diag − j|`` (``HardwareConfig.position_bits``)."""
    return cfg.position_bits


def alibi_layout(cfg: HardwareConfig) -> data.StructLayout:
    """A row's ALiBi slope as the softmax takes it with each score: the scale word's
    mantissa ``m`` and shift ``sh`` (model.variants.alibi_word); in the score stage also the
    row's position in its sequence ``pos`` (from its side words)."""
    return data.StructLayout({"m": unsigned(cfg.numerics.scale_mult_bits),
                              "sh": unsigned(SCALE_EXP_BITS), "pos": unsigned(rel_bits(cfg))})


def sink_layout(cfg: HardwareConfig) -> data.StructLayout:
    """A row's sink as the softmax takes it at its tile's first key: the running max ``m``
    and the row sum ``l`` it starts from (model.variants.sink_state)."""
    return data.StructLayout({"m": signed(SINK_M_BITS), "l": unsigned(cfg.exp_bits)})


def row_scale_layout(cfg: HardwareConfig) -> data.StructLayout:
    """A Q row's own softmax multiplier (``c_m``, ``c_sh``), or a K row's factor (mantissa
    ``k_m`` in ``c_m``, exponent ``k_e`` in ``c_sh``): the low bits of the word after the row
    in DRAM."""
    return data.StructLayout({"c_m": unsigned(cfg.numerics.scale_mult_bits),
                              "c_sh": unsigned(SCALE_EXP_BITS)})


def kv_beat_layout(cfg: HardwareConfig) -> data.StructLayout:
    """One K/V beat: a word, which ring it goes to, the last word of its row, the word after
    the row's data (``sc``: a K row's factor, ``row_scale_layout`` in the low bits; V's is
    unused), the last beat of the tile (the loader tags them, so the ring writer needs no
    command). A K beat of a row whose first words are V's row too (``LOAD_KV.v_in_k``) says
    so (``vw``: the V ring takes it as well; ``vlast``: V's row ends with it, its lanes past
    ``vlanes`` written as zeros). A paged cache's K factors come packed (``pw``: a word of
    the next rows' factors, kept by the ring, not a row's; ``pk``: a K row's last beat, its
    row takes the word's next factor)."""
    return data.StructLayout({"data": word_layout(cfg), "v": 1, "last": 1, "sc": 1,
                              "end": 1, "vw": 1, "vlast": 1, "pw": 1, "pk": 1,
                              "vlanes": unsigned((cfg.macs_per_line).bit_length())})


def cmd_layout(cfg: HardwareConfig) -> data.StructLayout:
    return data.StructLayout({
        "rows": unsigned((cfg.tile_rows).bit_length()),
        # rows of one head (GQA packs heads side by side; the causal mask needs it)
        "head_rows": unsigned((cfg.tile_rows).bit_length()),
        "d": unsigned((cfg.max_head_dim).bit_length()),
        # V's and O's head dim (COMPUTE.dv, or d where it is 0): the P V steps' and the output
        # rows' words
        "dv": unsigned((cfg.max_head_dim).bit_length()),
        "keys": unsigned((cfg.max_seq_len).bit_length()),
        "c_m": unsigned(cfg.numerics.scale_mult_bits),
        "c_sh": unsigned(SCALE_EXP_BITS),
        "causal": unsigned(1),
        "q_pos": unsigned(24),
        "diag": signed(25),
        # the window's lower edge: row r sees key j only if j ≥ q_pos + r + win_diag
        "window": unsigned(1),
        "win_diag": signed(25),
        # keys per step = 2**kps_log2 ≤ max_keys_per_step; with more than one,
        # rows·2**kps_log2 ≤ mac_lines
        "kps_log2": unsigned(kps_bits(cfg)),
        # the rows' own multipliers (loaded with the Q rows) instead of c_m, c_sh
        "row_scales": unsigned(1),
        # each key's factor (loaded with the K rows) applied to the multiplier
        "key_scales": unsigned(1),
        # each key's V factor (loaded with the V rows of a paged cache) applied to its p
        "value_scales": unsigned(1),
        # finalize each row's statistics (m, ℓ) as one more output word
        "lse": unsigned(1),
        # soft-capping (cfg.softcap_unit): the scores are logit/c, the unit's cap T
        "softcap": unsigned(1),
        "cap": unsigned(SOFTCAP_CAP_BITS),
        # each row's softmax starts from its sink (its side word, cfg.sinks_unit)
        "sinks": unsigned(1),
        # each logit less ALiBi's bias (the row's slope from its side words, cfg.alibi_unit)
        "alibi": unsigned(1),
        # COMPUTE.head_pos: log2 of the rows of a position (its query heads; row ρ sits at
        # position ρ >> hlog); 0 otherwise
        "hlog": unsigned(max(1, (cfg.mac_lines.bit_length() - 1).bit_length())),
        # the tile's parts (COMPUTE.cont, .more): this part continues the rows' m, ℓ and O;
        # another part follows (no finalize, the Q rows kept)
        "cont": unsigned(1),
        "more": unsigned(1),
        # only tile rows [sel_row, sel_row + head_rows) see this part's keys (COMPUTE.select)
        "select": unsigned(1),
        "sel_row": unsigned((cfg.tile_rows).bit_length()),
    })
