"""PEArray: the ``p × q`` MACs of the compute core, one multiplier each for both steps.

``Q Kᵀ``: MAC (i, l) multiplies line i's Q element by the broadcast K element, an adder tree
sums the line's q products, and the line accumulates its score over the row's words.
``P V``: MAC (i, l) forms ``p_i · v_l`` and adds it to its O element rescaled by the key's
shift, ``O = (O >> shift_i) + p_i·v_l``; with several keys per step a row's keys sit on
consecutive lines and the sum chains from line to line (the chain's head starts from the O word
read from the buffer). The core routes words to and from the lines (hw/core.py); this block
is the arithmetic, bit-exact with ``model.numerics`` (``accumulate``, ``rescale``).
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.contract.formats import SHIFT_BITS
from attenio.hw.arith import data_reg, kept_copies
from attenio.hw.dsp import input_registered_product
from attenio.hw.layouts import word_layout

__all__ = ["PEArray"]


class PEArray(wiring.Component):
    """The MAC array (see the module docstring).

    Ports (cN: the core's pipeline stage, docs/architecture.md)
    -----
    qk : the operands of this cycle are ``Q Kᵀ``'s (else ``P V``'s), a bit a line (copies of
        one bit: the score stage's registers, so no one net drives every MAC's select); c1.
    q, k : each line's Q word and K word (``Q Kᵀ``); c1.
    p, v, shift : each line's p value, V word and rescale shift (``P V``); c1.
    acc, acc_first : add the sums of the operands of two cycles before to each line's score
        (``acc_first``: start it from them); c3. ``scores``: the scores, the cycle after.
    o_old : each line's O word as read from the buffer (c2); ``zero``: the tile's first key
        (the O words count as 0; c2, beside them); ``head``: the line starts a chain (the first
        key of its row in the step). ``o_new``: each line's new O word (c4, combinational).

    Latency: operands registered (c1 → c2), products registered (c2 → c3); ``Q Kᵀ`` sums
    registered (c3 → c4) and accumulated (c4 → c5); ``P V``'s rescaled O registered
    (c3 → c4) and the chained sum formed in c4.
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        p, q = cfg.mac_lines, cfg.macs_per_line
        acc_word = data.ArrayLayout(signed(cfg.acc_bits), q)
        super().__init__({
            "qk": In(p),
            "q": In(data.ArrayLayout(word_layout(cfg), p)),
            "k": In(data.ArrayLayout(word_layout(cfg), p)),
            "p": In(data.ArrayLayout(unsigned(cfg.exp_bits), p)),
            "v": In(data.ArrayLayout(word_layout(cfg), p)),
            "shift": In(data.ArrayLayout(unsigned(SHIFT_BITS), p)),
            "acc": In(1), "acc_first": In(1),
            "scores": Out(data.ArrayLayout(signed(cfg.score_bits), p)),
            "o_old": In(data.ArrayLayout(acc_word, p)),
            "zero": In(1), "head": In(p),
            "o_new": Out(data.ArrayLayout(acc_word, p)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        p, q = cfg.mac_lines, cfg.macs_per_line
        lq = q.bit_length() - 1
        acc_word = data.ArrayLayout(signed(cfg.acc_bits), q)
        prod_bits = 2 * cfg.data_bits
        # every register of the array is data (hw.arith.data_reg), off START's reset: each is
        # written before it is read, by the core's own reset control (acc_first, zero, head)
        prods = [[data_reg(signed(prod_bits), f"qk_p{i}_{lane}") for lane in range(q)]
                 for i in range(p)]
        o_pv = [[data_reg(signed(cfg.pv_bits + 1), f"pv_p{i}_{lane}") for lane in range(q)]
                for i in range(p)]
        for i in range(p):
            for lane in range(q):
                # One multiplier per MAC for both steps (a step is Q Kᵀ or P V, never both):
                # q·k (B × B signed) or p·v (PF+1 unsigned × B signed) fits one 18×18 DSP.
                # Its operands are registered (c1 → c2: on an ECP5 the DSP's own input
                # registers, hw/dsp.py), its product too (c2 → c3).
                opa = Signal(signed(cfg.exp_bits + 1), name=f"mac_a{i}_{lane}")
                opb = Signal(signed(cfg.data_bits), name=f"mac_b{i}_{lane}")
                m.d.comb += [opa.eq(Mux(self.qk[i], self.q[i][lane], self.p[i])),
                             opb.eq(Mux(self.qk[i], self.k[i][lane], self.v[i][lane]))]
                prod = Signal(signed(cfg.pv_bits + 1), name=f"mac{i}_{lane}")
                m.d.comb += prod.eq(input_registered_product(m, platform, opa, opb,
                                                             f"mac{i}_{lane}_dsp"))
                m.d.sync += [prods[i][lane].eq(prod), o_pv[i][lane].eq(prod)]

        # ---- Q Kᵀ: adder tree (c3 → c4), accumulate (c4 → c5) ----
        sums = [data_reg(signed(prod_bits + lq + 1), f"qk_sum{i}") for i in range(p)]
        for i in range(p):
            total = prods[i][0]
            for lane in range(1, q):
                total = total + prods[i][lane]
            m.d.sync += sums[i].eq(total)
        scores = data_reg(self.scores.shape(), "scores")
        m.d.comb += self.scores.eq(scores)
        with m.If(self.acc):
            for i in range(p):
                m.d.sync += scores[i].eq(Mux(self.acc_first, sums[i], scores[i] + sums[i]))

        # ---- P V: the rescale shift follows the operands; c3: a chain head's own O word,
        # shifted (registered); c4: O = (O >> shift) + p·v, chained over a row's lines ----
        # (the shift amount and the zero flag a register per lane, loaded with a P V op in
        # c2: each drives its lane's barrel shift, where one register a line drove all q of
        # them, the fpga block's worst path, 6.7 ns of routing; kept_copies keeps synthesis
        # from merging them back)
        o_old = [data_reg(acc_word, f"pv_o{i}") for i in range(p)]
        sh1b = [data_reg(unsigned(SHIFT_BITS), f"pv_sh1b_{i}") for i in range(p)]
        pv2 = Signal(name="pv_op2")
        m.d.sync += pv2.eq(~self.qk[0])
        o_sh3 = [data_reg(acc_word, f"pv_osh{i}") for i in range(p)]
        sh3 = [data_reg(unsigned(SHIFT_BITS), f"pv_sh3_{i}") for i in range(p)]
        o_pv3 = [[data_reg(signed(cfg.pv_bits + 1), f"pv_p3_{i}_{lane}") for lane in range(q)]
                 for i in range(p)]
        for i in range(p):
            salts = [self.o_old[i][lane][0] for lane in range(q)]
            sh2 = kept_copies(m, sh1b[i], pv2, salts, f"pv_sh{i}", reset_less=True)
            zero2 = kept_copies(m, self.zero, pv2, salts, f"pv_zero{i}", reset_less=True)
            m.d.sync += [o_old[i].eq(self.o_old[i]), sh1b[i].eq(self.shift[i]),
                         sh3[i].eq(sh2[0])]
            for lane in range(q):
                m.d.sync += [o_sh3[i][lane].eq(Mux(zero2[lane], 0, o_old[i][lane])
                                               >> sh2[lane]),
                             o_pv3[i][lane].eq(o_pv[i][lane])]
        # a chain is one step's keys of a row: at most max_keys_per_step lines (the decoder's
        # kps_max), so a line at a multiple of it always heads one, and no chain runs across it
        # (on a config of one key a step, no chain at all)
        kps_max = cfg.max_keys_per_step
        for i in range(p):
            for lane in range(q):
                src = (o_sh3[i][lane] if i % kps_max == 0
                       else Mux(self.head[i], o_sh3[i][lane], self.o_new[i - 1][lane] >> sh3[i]))
                m.d.comb += self.o_new[i][lane].eq(src + o_pv3[i][lane])
        return m
