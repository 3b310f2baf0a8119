"""The score stage of the compute core: the ``Q Kᵀ`` pipeline's control (the PE array does the
products and sums), each line's visibility of its key (causal mask, window, end of keys) and
the score transform's multiplier (the tile's, the row's own or times the key's factor), all
meeting the group's scores as they leave the array for the softmax."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.contract.formats import KEY_MANT_BITS
from attenio.contract.formats import SCALE_SHIFT_MAX as MAX_SCALE_SHIFT
from attenio.contract.rules import causal_visible, window_visible
from attenio.hw.arith import data_reg, kept_copies, shift_add_product
from attenio.hw.lanes import Lanes
from attenio.hw.layouts import (
    alibi_layout,
    cmd_layout,
    q_side_layout,
    rel_bits,
    row_scale_layout,
    sink_layout,
    word_layout,
)

__all__ = ["ScoreStage", "QK_LATENCY"]

# a Q Kᵀ (group, word) issued in cycle c0 has its group's scores accumulated in c4 and enters
# the softmax in c5 (operands registered in c1 and c1b, products in c2, sums in c3)
QK_LATENCY = 5


def _log2(x: int) -> int:
    return x.bit_length() - 1


class ScoreStage(wiring.Component):
    """Q Kᵀ issue → scores with their mask and multiplier.

    Ports
    -----
    issue, is_qk, g, w, st, new : the step sequencer's issue (a ``Q Kᵀ`` (group, word) when
        both are high), its row group, word and step, and whether the group starts there.
    words, groups, running, blog, cmd : the tile's words a row, row groups, running flag,
        log2 keys per step and command.
    k_data, k_scale : the K ring's copies (a word each, and each key's factor).
    sc_data : the rows' multipliers of group ``sc_addr`` (the Q buffer's table, read in c1b).
    pe_qk, pe_k, pe_acc, pe_acc_first : the PE array's control and K operands (its Q operands
        come from the Q buffer directly).
    valid, group, step, visible : in c4 a group's scores are done (``PEArray.scores``): its
        group, step and which lines see their key; ``first``: the group starts at this step
        (the sequencer's ``new`` with its issue). last_op, step_last: the sequencer's last
        issue of a step, and in c4 its group is the step's last (row groups a masked step
        skips may include the tile's last).
    c_m, c_sh : each lane's multiplier in c4: the tile's ``c_m``, ``c_sh``, the row's own
        (``row_scales``), times the key's factor (``key_scales``: ``c_m·k_hi`` exactly and the
        shift ``min(c_sh + k_e + KEY_MANT_BITS, SCALE_SHIFT_MAX)``, ``model.numerics.scale``).
    ml_addr_next, ml_load : the m/ℓ read address of the next cycle (the group that will be in
        c3, its data arriving with its scores) and whether one is in c3 then: the core's
        per-bank address registers load it a cycle ahead.
    sink : each lane's row's sink in c4 (``sinks_unit`` only: the Q buffer's table).
    alibi, rel : each lane's row's ALiBi slope word in c4 (``alibi_unit`` only: the Q buffer's
        table) and the distance ``|pos + diag − key|`` of its row and key, ``pos`` the row's
        position in its sequence from its side words (so however the tile packs its rows:
        heads, chains of keys), saturated at ``2**rel_bits(cfg) − 1`` (lanes that see their
        key are never that far).

    Latency: ``QK_LATENCY`` − 1 = 4 cycles from a group's last word to ``valid``.
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        p, gmax, wmax = cfg.mac_lines, cfg.row_groups, cfg.words_per_row
        keys = range(cfg.max_seq_len + 1)
        copies = cfg.max_keys_per_step
        super().__init__({
            "issue": In(1), "is_qk": In(1), "g": In(range(gmax + 1)), "w": In(range(wmax + 1)),
            "last_op": In(1), "step_last": Out(1), "new": In(1), "first": Out(1),
            "st": In(keys), "words": In(range(wmax + 1)), "groups": In(range(gmax + 1)),
            "running": In(1), "blog": In(range(_log2(copies) + 1)), "cmd": In(cmd_layout(cfg)),
            "k_data": In(data.ArrayLayout(word_layout(cfg), copies)),
            "k_scale": In(data.ArrayLayout(row_scale_layout(cfg), copies)),
            "sc_data": In(data.ArrayLayout(q_side_layout(cfg), p)),
            "sc_addr": Out(range(gmax + 1)),
            "pe_qk": Out(p), "pe_acc": Out(1), "pe_acc_first": Out(1),
            "pe_k": Out(data.ArrayLayout(word_layout(cfg), p)),
            "valid": Out(1), "group": Out(range(gmax + 1)), "step": Out(keys),
            "visible": Out(p), "ml_addr_next": Out(range(gmax + 1)),
            "ml_load": Out(1),
            "c_m": Out(data.ArrayLayout(unsigned(cfg.scale_factor_bits), p)),
            "c_sh": Out(data.ArrayLayout(unsigned(6), p)),
            **({"sink": Out(data.ArrayLayout(sink_layout(cfg), p))} if cfg.sinks_unit else {}),
            **({"alibi": Out(data.ArrayLayout(alibi_layout(cfg), p)),
                "rel": Out(data.ArrayLayout(unsigned(rel_bits(cfg)), p))}
               if cfg.alibi_unit else {}),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = Lanes(m, self.cfg, self.blog)
        kf2 = self._pipeline(m, lanes)
        self._visibility(m)
        self._multipliers(m, kf2)
        return m

    def _pipeline(self, m: Module, lanes: Lanes):
        """The (group, word) tags c0 → c4 beside the array, and each line's key factor taken
        with the issue (c0: the ring reads key kbase + copy) and carried to c2."""
        cfg, p = self.cfg, self.cfg.mac_lines
        g, st = self.g, self.st
        tags = [(Signal(name=f"qk_v{k}"), Signal.like(g, name=f"qk_g{k}"),
                 Signal.like(st, name=f"qk_st{k}"), Signal(name=f"qk_first{k}"),
                 Signal(name=f"qk_last{k}"), Signal(name=f"qk_glast{k}"),
                 Signal(name=f"qk_new{k}"))
                for k in ("1", "1b", "2", "3")]
        m.d.sync += [a.eq(b) for a, b in zip(tags[0], (
            self.issue & self.is_qk, g, st, self.w == 0, self.w == self.words - 1,
            self.last_op, self.new), strict=True)]
        for prev, nxt in zip(tags[:-1], tags[1:], strict=True):
            m.d.sync += [a.eq(b) for a, b in zip(nxt, prev, strict=True)]
        (v1, *_), (_, g1b, *_), (v2, g2, *_), (v3, g3, k3, first3, last3, glast3, new3) = tags
        self._g3 = g3                 # the group in c3 (the selection's lanes, registered)
        self._k3 = k3                 # and the step (the mask's key-side sums, registered)
        # one multiplier per MAC serves both steps, its operands chosen by pe_qk (c1): a
        # register a line, loaded with every issue (it is read only in an op's c1), where v1
        # drove 454 LUT inputs on the fpga preset (session 18, scripts/fanout.py); a bit of
        # the line's Q-side word keeps the copies apart (kept_copies)
        qk = kept_copies(m, self.is_qk, self.issue,
                         [self.sc_data[i].as_value()[0] for i in range(p)], "pe_qk", True)
        m.d.comb += [self.pe_qk.eq(Cat(*qk)), self.pe_acc.eq(v3), self.pe_acc_first.eq(first3),
                     self.ml_addr_next.eq(g2), self.ml_load.eq(v2), self.sc_addr.eq(g1b)]
        wl = word_layout(cfg)
        for i in range(p):
            m.d.comb += self.pe_k[i].eq(lanes.copy(self.k_data, i, wl, "k"))
        m.d.sync += [self.valid.eq(v3 & last3), self.group.eq(g3), self.step.eq(k3),
                     self.step_last.eq(v3 & glast3), self.first.eq(new3)]
        kf = [lanes.copy(self.k_scale, i, row_scale_layout(cfg), "kf_c0") for i in range(p)]
        for stage in ("c1", "c1b", "c2"):
            nxt = [data_reg(row_scale_layout(cfg), f"kf_{stage}_{i}")
                   for i in range(p)]       # data, off START's reset (issue #47)
            m.d.sync += [nxt[i].eq(kf[i]) for i in range(p)]
            kf = nxt
        return kf

    def _visibility(self, m: Module) -> None:
        """Which line sees its key (k4·b + slot) in c4: the causal mask, the window and, in
        the last step, keys past the end.

        Packed heads (GQA, head_rows < rows): line i of group g holds tile row g·p + i, at
        position (g·p + i) mod head_rows of its head. head_rows ≥ p (the decoder's rule), so
        each line's position is a register that steps by p and wraps once per head, moved as
        each group's scores finish (groups finish in order within a Q Kᵀ step); lines past the
        tile's rows (padding) see every key."""
        cfg, p = self.cfg, self.cfg.mac_lines
        lp, c, blog = _log2(p), self.cmd, self.blog
        bmask = Signal(range(p + 1))
        m.d.comb += bmask.eq((1 << blog) - 1)
        multi = Signal()       # per command, registered as the sums below are
        m.d.sync += multi.eq((c.head_rows != 0) & (c.head_rows < c.rows))
        pos = [Signal(range(cfg.tile_rows + p), name=f"qk_pos{i}") for i in range(p)]
        with m.If(~self.running | (self.valid & (self.group == self.groups - 1))):
            m.d.sync += [pos[i].eq(i) for i in range(p)]
        with m.Elif(self.valid):
            for i in range(p):
                nxt = pos[i] + p
                m.d.sync += pos[i].eq(Mux(nxt >= c.head_rows, nxt - c.head_rows, nxt))
        # the tile's q_pos + diag and q_pos + win_diag, registered: a command is held for its
        # tile and its first scores reach c4 at least four cycles after it arrives, so the
        # 25-bit sums leave the per-cycle path (fpga block route: 69.7 MHz with them in it)
        qd = Signal(signed(len(c.diag) + 2), name="qk_qdiag")
        qw = Signal(signed(len(c.win_diag) + 2), name="qk_qwin")
        m.d.sync += [qd.eq(c.q_pos + c.diag), qw.eq(c.q_pos + c.win_diag)]
        # the step's first key less each diagonal, and the keys left from it: registered from
        # the step in c3, so a line's masks in c4 are one compare each with its row (the fpga
        # block's worst path was the row's register, an adder and the compare)
        kbase3 = self._k3 << blog
        wk = max(len(kbase3), len(qd), len(qw), len(c.keys)) + 2
        kd, kw, kk = (Signal(signed(wk), name=f"qk_{n}") for n in ("kdiag", "kwin", "kleft"))
        m.d.sync += [kd.eq(kbase3 - qd), kw.eq(kbase3 - qw), kk.eq(c.keys - kbase3)]
        # a selected part (COMPUTE.select): tile rows [sel_row, sel_row + head_rows) alone
        s_lo = Signal.like(c.sel_row, name="qk_sel_lo")
        s_hi = Signal(len(c.sel_row) + 1, name="qk_sel_hi")
        m.d.sync += [s_lo.eq(c.sel_row), s_hi.eq(c.sel_row + c.head_rows)]
        # which lanes of the group hold selected rows: compared from the group in c3 and
        # registered with it, off the path to `visible` (the fpga block route: 95.0 → 76.3 MHz
        # with the compare in c4)
        chosen = Signal(p, name="qk_chosen")
        for i in range(p):
            # the line's row in its tile, from the group in c3 and registered with it (the
            # adder and head_pos's shift off the path to `visible`): with head_pos (hlog > 0)
            # a row's position is its tile row over the rows of a position (hlog = 0
            # otherwise); several keys a step: row i >> blog of the one group
            row3 = (self._g3 << lp) + i
            row_r = Signal(range(cfg.tile_rows + p), name=f"qk_row{i}")
            past = Signal(name=f"qk_past{i}")         # a padding line past the tile's rows
            m.d.sync += [row_r.eq(Mux(blog == 0, row3, i >> blog) >> c.hlog),
                         past.eq(row3 >= c.rows),
                         chosen[i].eq(~c.select | ((row3 >= s_lo) & (row3 < s_hi)))]
            row = Mux(multi & (blog == 0), pos[i], row_r)
            key_i = (self.step << blog) + (i & bmask)
            # the masks with the diagonals on the key's side: key − diag ≤ row and key −
            # win_diag ≥ row, whose step parts are registered sums of c3
            seen = causal_visible(kd + (i & bmask), row, 0)
            inside = window_visible(kw + (i & bmask), row, 0)
            pad = multi & past
            m.d.comb += self.visible[i].eq(
                ((i & bmask) < kk) & chosen[i]
                & (((~c.causal | seen) & (~c.window | inside)) | pad))
            if cfg.alibi_unit:            # ALiBi's distance: the row's position, its key
                dist = Signal(signed(len(c.q_pos) + 4), name=f"alibi_dist{i}")
                m.d.comb += dist.eq(self.alibi[i].pos + c.diag - key_i)
                top = (1 << rel_bits(cfg)) - 1
                mag = Mux(dist < 0, -dist, dist)
                m.d.comb += self.rel[i].eq(Mux(mag > top, top, mag))

    def _multipliers(self, m: Module, kf2) -> None:
        """Each lane's multiplier with its scores in c4: the rows' (read c1b → c2) meet the
        keys' factors (c2); two register stages: c2 → c3 the product and the shift, c3 → c4
        the choice and the cap."""
        cfg, p, c = self.cfg, self.cfg.mac_lines, self.cmd
        cmb = cfg.numerics.scale_mult_bits
        sc = self.sc_data
        for i in range(p):
            # the registers here are data, off START's reset (``reset_less``, issue #47),
            # each written before the scores they go with
            if cfg.sinks_unit:          # the row's sink beside its multiplier: c2 → c3 → c4
                s3 = data_reg(sink_layout(cfg), f"sink3_{i}")
                m.d.sync += [s3.m.eq(sc[i].sink_m), s3.l.eq(sc[i].sink_l),
                             self.sink[i].eq(s3)]
            if cfg.alibi_unit:          # and its ALiBi slope likewise
                a3 = data_reg(alibi_layout(cfg), f"alibi3_{i}")
                m.d.sync += [a3.m.eq(sc[i].alibi_m), a3.sh.eq(sc[i].alibi_sh),
                             a3.pos.eq(sc[i].alibi_pos), self.alibi[i].eq(a3)]
            cm2 = Mux(c.row_scales, sc[i].c_m, c.c_m)
            sh2 = Mux(c.row_scales, sc[i].c_sh, c.c_sh)
            cm3 = data_reg(unsigned(cmb), f"cm3_{i}")
            sh3 = data_reg(unsigned(8), f"csh3_{i}")
            m.d.sync += cm3.eq(cm2)
            if not cfg.key_scales_supported:
                m.d.sync += [sh3.eq(sh2), self.c_m[i].eq(cm3), self.c_sh[i].eq(sh3)]
                continue
            kf = kf2[i]
            k_hi = kf.c_m[cmb - KEY_MANT_BITS:]
            prod3 = data_reg(unsigned(cfg.scale_factor_bits), f"cmk3_{i}")
            m.d.sync += [prod3.eq(shift_add_product(cm2, k_hi)),
                         sh3.eq(sh2 + Mux(c.key_scales, kf.c_sh + KEY_MANT_BITS, 0))]
            m.d.sync += [self.c_m[i].eq(Mux(c.key_scales, prod3, cm3)),
                         self.c_sh[i].eq(Mux(sh3 > MAX_SCALE_SHIFT, MAX_SCALE_SHIFT, sh3))]
