"""The ``P V`` stage of the compute core: each (row group, word) of a ``P V`` step reads the
rows' p values and shifts and the O word, routes them and the V word to the lines, and writes
``O = (O >> shift) + p·v`` back from the last line of each row's chain (the PE array does the
products and the rescale-and-add)."""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import KEY_MANT_BITS, HardwareConfig
from attenio.contract.formats import SHIFT_BITS
from attenio.hw.lanes import Lanes
from attenio.hw.layouts import row_scale_layout, word_layout
from attenio.hw.softmax_stage import pbuf_layout

__all__ = ["PVStage", "acc_word_layout"]


def acc_word_layout(cfg: HardwareConfig) -> data.ArrayLayout:
    """A word of O accumulators (``macs_per_line`` of them)."""
    return data.ArrayLayout(signed(cfg.acc_bits), cfg.macs_per_line)


class PVStage(wiring.Component):
    """P V issue → O read-modify-write.

    Pipeline: c0 reads V and p/shift; c1 the MAC operands (registered) and the O read; c2 the
    products and the routed O words; c3 a chain head's ``O >> shift``; c4 ``O = (O >> shift)
    + p·v`` over each row's lines, written back from its last line.

    Ports
    -----
    issue, is_qk, g, w, st, new, blog : the step sequencer's issue (a ``P V`` (group, word)
        when ``is_qk`` is low), its row group, word and step, whether the group starts at this
        step (``StepSequencer.new``); log2 keys per step.
    pb_rd_addr, pb_data : the P buffer's read (half ``st mod 2``, the group) and its banks'
        words.
    v_data : the V ring's copies. v_scale, value_scales : each copy's key's V factor (c0,
        combinational from the ring's registers) and whether the tile's keys have one
        (``COMPUTE.value_scales``): line i's p is then ``floor(p·v_hi / 2**(KEY_MANT_BITS +
        v_e))`` (model.scales.ScaleParams.value_scaled), its factor registered with the
        issue (c1, beside the P buffer's word).
    o_rd_addr, o_data : the O read (c1) and the banks' words. ``o_rd_next`` and ``o_rd_load``:
        its address and whether it reads, a cycle ahead (c0), for the core's per-bank address
        registers; ``o_wr_next`` and ``o_wr_load`` the same for the write back (c3).
    pe_p, pe_shift, pe_v, pe_o_old, pe_head, pe_zero, pe_o_new : the PE array's P V operands
        (line i's chain starts at ``i mod b == 0``; ``zero``: a group's first step starts
        from 0, never in a part that continues its tile, ``cont``) and its results.
    o_wr_addr, o_wr_en, o_wr_data : the write back (c4): with b > 1 only the banks of real
        rows (ρ < p/b).
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        p, gmax, wmax = cfg.mac_lines, cfg.row_groups, cfg.words_per_row
        copies = cfg.max_keys_per_step
        acc = acc_word_layout(cfg)
        super().__init__({
            "issue": In(1), "is_qk": In(1), "g": In(range(gmax + 1)), "w": In(range(wmax + 1)),
            "st": In(range(cfg.max_seq_len + 1)), "blog": In(range(copies.bit_length())),
            "cont": In(1), "new": In(1),
            "pb_rd_addr": Out(range(2 * gmax)),
            "pb_data": In(data.ArrayLayout(pbuf_layout(cfg), p)),
            "v_data": In(data.ArrayLayout(word_layout(cfg), copies)),
            "v_scale": In(data.ArrayLayout(row_scale_layout(cfg), copies)),
            "value_scales": In(1),
            "o_rd_addr": Out(range(gmax * wmax + 1)),
            "o_rd_next": Out(range(gmax * wmax + 1)), "o_rd_load": Out(1),
            "o_wr_next": Out(range(gmax * wmax + 1)), "o_wr_load": Out(1),
            "o_data": In(data.ArrayLayout(acc, p)),
            "pe_p": Out(data.ArrayLayout(unsigned(cfg.exp_bits), p)),
            "pe_shift": Out(data.ArrayLayout(unsigned(SHIFT_BITS), p)),
            "pe_v": Out(data.ArrayLayout(word_layout(cfg), p)),
            "pe_o_old": Out(data.ArrayLayout(acc, p)), "pe_head": Out(p), "pe_zero": Out(1),
            "pe_o_new": In(data.ArrayLayout(acc, p)),
            "o_wr_addr": Out(range(gmax * wmax + 1)), "o_wr_en": Out(p),
            "o_wr_data": Out(data.ArrayLayout(acc, p)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, p = self.cfg, self.cfg.mac_lines
        gmax, wmax = cfg.row_groups, cfg.words_per_row
        acc = acc_word_layout(cfg)
        lanes = Lanes(m, cfg, self.blog)
        blog = self.blog
        bmask = Signal(range(p + 1))
        m.d.comb += bmask.eq((1 << blog) - 1)
        m.d.comb += self.pb_rd_addr.eq(Mux(self.st[0], gmax, 0) + self.g)
        pv_addr = Signal(range(gmax * wmax + 1))
        m.d.comb += pv_addr.eq(self.g * wmax + self.w)
        pvs = [Signal(name=f"pv_v{k}") for k in range(5)]
        addrs = [Signal.like(pv_addr, name=f"pv_addr{k}") for k in range(5)]
        zeros = [Signal(name=f"pv_zero{k}") for k in range(5)]
        m.d.comb += [pvs[0].eq(self.issue & ~self.is_qk), addrs[0].eq(pv_addr),
                     zeros[0].eq(self.new & ~self.cont)]
        for k in range(1, 5):
            m.d.sync += [pvs[k].eq(pvs[k - 1]), addrs[k].eq(addrs[k - 1]),
                         zeros[k].eq(zeros[k - 1])]
        wl = word_layout(cfg)
        vf = self._value_factors(m, lanes)
        for i in range(p):
            pbv = self.pb_data[i]
            # combinational from the command (constant during a tile): with one key per step
            # it is a constant and synthesis drops the chain
            m.d.comb += [self.pe_p[i].eq(pbv.p if vf is None else Mux(
                             self.value_scales, (pbv.p * vf[i].c_m) >> vf[i].c_sh, pbv.p)),
                         self.pe_shift[i].eq(pbv.shift),
                         self.pe_v[i].eq(lanes.copy(self.v_data, i, wl, "v")),
                         self.pe_o_old[i].eq(lanes.from_row_bank(self.o_data, acc, i, "o")),
                         self.pe_head[i].eq((i & bmask) == 0)]
        m.d.comb += [self.pe_zero.eq(zeros[2]), self.o_rd_addr.eq(addrs[1]),
                     self.o_wr_addr.eq(addrs[4]),
                     self.o_rd_next.eq(addrs[0]), self.o_rd_load.eq(pvs[0]),
                     self.o_wr_next.eq(addrs[3]), self.o_wr_load.eq(pvs[3])]
        for i in range(p):
            m.d.comb += [
                self.o_wr_data[i].eq(lanes.from_chain_end(self.pe_o_new, acc, i, "o")),
                self.o_wr_en[i].eq(pvs[4] & ((blog == 0) | ((i << blog) < p)))]
        return m

    def _value_factors(self, m: Module, lanes: Lanes):
        """Each line's V factor in c1: its copy's, registered with the issue, as the
        multiplier ``v_hi`` (``c_m``) and the shift ``KEY_MANT_BITS + v_e`` (``c_sh``); None
        on a config without the unit (``value_scales_unit``)."""
        cfg = self.cfg
        if not cfg.value_scales_unit:
            return None
        cmb = cfg.numerics.scale_mult_bits
        shape = data.StructLayout({"c_m": unsigned(KEY_MANT_BITS),
                                   "c_sh": unsigned(len(self.v_scale[0].c_sh) + 1)})
        regs = [Signal(shape, name=f"vf_c1_{c}") for c in range(cfg.max_keys_per_step)]
        for c, r in enumerate(regs):
            m.d.sync += [r.c_m.eq(self.v_scale[c].c_m[cmb - KEY_MANT_BITS:]),
                         r.c_sh.eq(self.v_scale[c].c_sh + KEY_MANT_BITS)]
        return [lanes.copy(regs, i, shape, "vf") for i in range(cfg.mac_lines)]
