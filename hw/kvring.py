"""KVRing: the K and V rings the K/V stream is written into, with their occupancy and the
credits the loader requests against."""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio.base.config import FACTOR_SLOT_BITS, KEY_MANT_BITS, HardwareConfig
from attenio.hw.layouts import kv_beat_layout, row_scale_layout, word_layout

__all__ = ["KVRing"]


def _log2(x: int) -> int:
    return x.bit_length() - 1


def _is_pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


class KVRing(wiring.Component):
    """A K ring and a V ring of ``kv_ring_depth/2`` rows each, replicated once per key a step
    can take (``max_keys_per_step`` copies), so a step reads the words of all its keys in the
    same cycle.

    Writer: beats come tagged (ring, last word of the row, last beat of the tile), so it needs
    no command. A K beat tagged ``vw`` (``LOAD_KV.v_in_k``: the row's first words are V's
    row) is written to both rings; V's row ends with the beat tagged ``vlast``. A beat is
    taken while its ring has room for the row (``k_room``/``v_room``, registers off the AXI
    read-data path; a ``vw`` beat needs both) and the tile's last beat is not in yet. Row j
    of a ring goes to slot j mod ring.

    Credits: at a step's end (``step_end``) the ring the step read (``is_qk``: K) frees its rows
    up to ``kend``: ``k_free``/``v_free`` count rows the PE array is done with. ``clear`` (the
    tile's end) empties both rings.

    Reads: copy c of each ring reads key ``kbase + c``'s word ``word`` (``k_data[c]``,
    ``v_data[c]`` the cycle after).

    K factors (``LOAD_KV.key_scales``): a K row's beat tagged ``sc`` (the word after its data)
    goes to a register of the row's slot instead of the ring, and ``k_scale[c]`` is key
    ``kbase + c``'s, in the same cycle (combinational from the registers; the row stays until
    its step ends). V rows carry no factor. From a paged cache they come packed: a beat
    tagged ``pw`` (a word of factors, ``FACTOR_SLOT_BITS`` each: the mantissa's top
    ``KEY_MANT_BITS``, then the exponent) is kept in a register, and each K row's last beat
    (``pk``) puts the word's next factor in the row's slot register. V factors
    (``LOAD_KV.value_scales``, paged only; ``value_scales_unit``) come the same way in V's
    beats, to registers of V's slots: ``v_scale[c]`` is key ``kbase + c``'s.
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        self.ring = cfg.ring_rows
        self.wmax = cfg.words_per_row
        copies = cfg.max_keys_per_step
        keys = range(cfg.max_seq_len + 1)
        super().__init__({
            "kv": In(stream.Signature(kv_beat_layout(cfg))),
            "step_end": In(1), "is_qk": In(1), "kend": In(keys), "clear": In(1),
            "kbase": In(keys), "word": In(range(self.wmax + 1)),
            "k_written": Out(keys), "v_written": Out(keys),
            "k_free": Out(keys), "v_free": Out(keys), "closed": Out(1),
            "k_data": Out(data.ArrayLayout(word_layout(cfg), copies)),
            "v_data": Out(data.ArrayLayout(word_layout(cfg), copies)),
            "k_scale": Out(data.ArrayLayout(row_scale_layout(cfg), copies)),
            "v_scale": Out(data.ArrayLayout(row_scale_layout(cfg), copies)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        q = cfg.macs_per_line
        ring, wmax = self.ring, self.wmax
        wl = word_layout(cfg)
        k_rd, k_wr, v_rd, v_wr = [], [], [], []
        for cpy in range(cfg.max_keys_per_step):
            for name, rds, wrs in (("kring", k_rd, k_wr), ("vring", v_rd, v_wr)):
                mem = Memory(shape=wl, depth=ring * wmax, init=[])
                m.submodules[f"{name}{cpy}"] = mem
                rds.append(mem.read_port())
                wrs.append(mem.write_port())

        def slot_of(x):
            return x[:_log2(ring)] if _is_pow2(ring) else x % ring

        for cpy in range(cfg.max_keys_per_step):
            addr = slot_of(self.kbase + cpy) * wmax + self.word
            m.d.comb += [k_rd[cpy].addr.eq(addr), v_rd[cpy].addr.eq(addr),
                         self.k_data[cpy].eq(k_rd[cpy].data), self.v_data[cpy].eq(v_rd[cpy].data)]

        # ---- writer ----
        k_wr_n, v_wr_n = self.k_written, self.v_written     # rows fully written
        k_free, v_free = self.k_free, self.v_free
        kv_closed = self.closed                              # the tile's last beat is in
        kvw = Signal(range(wmax + 1))
        beat = self.kv.payload
        write_k = Signal()
        m.d.comb += write_k.eq(~beat.v)
        # ring occupancy (rows written, not yet freed) and room for a row, kept as registers
        # (off the AXI read-data path); room_k/room_v = k_wr_n − k_free < ring
        k_room, v_room = Signal(init=1), Signal(init=1)
        # a K beat that is V's too (LOAD_KV.v_in_k) waits for V's room as well (only the
        # beats that write V: the rest of the K row never waits on V)
        m.d.comb += self.kv.ready.eq(Mux(write_k, k_room & (~beat.vw | v_room), v_room)
                                     & ~kv_closed)
        k_slot = Signal(range(ring))
        v_slot = Signal(range(ring))
        m.d.comb += [k_slot.eq(slot_of(k_wr_n)), v_slot.eq(slot_of(v_wr_n))]
        take = self.kv.valid & self.kv.ready
        write_v = Signal()           # a V beat, or a K beat whose row is V's too
        m.d.comb += write_v.eq(~write_k | beat.vw)
        for wrs, slot, sel in ((k_wr, k_slot, write_k), (v_wr, v_slot, write_v)):
            for mem_wr in wrs:
                m.d.comb += [mem_wr.addr.eq(slot * wmax + kvw),
                             mem_wr.en.eq(take & sel & ~beat.sc & ~beat.pw)]
                for lane in range(q):
                    # lanes past d come in as zeros (the loader pads the row's last word);
                    # V's last word inside a K row: its lanes past d_v written as zeros
                    cut = write_k & beat.vlast & (lane >= beat.vlanes) if wrs is v_wr else 0
                    m.d.comb += mem_wr.data[lane].eq(Mux(cut, 0, beat.data[lane]))
        v_row_end = Signal()         # a V row completes: its last beat, or V's last word of a K row
        m.d.comb += v_row_end.eq(Mux(write_k, beat.vlast, beat.last))
        with m.If(take & ~beat.pw):
            with m.If(beat.last):
                m.d.sync += kvw.eq(0)
                with m.If(write_k):
                    m.d.sync += k_wr_n.eq(k_wr_n + 1)
            with m.Else():
                m.d.sync += kvw.eq(kvw + 1)
            with m.If(v_row_end):
                m.d.sync += v_wr_n.eq(v_wr_n + 1)
            with m.If(beat.end):
                m.d.sync += kv_closed.eq(1)

        # K and V factors: a register per ring slot (a few), written by a K row's sc beat or
        # from a paged cache's word of factors (K's and V's words each their own)
        if cfg.key_scales_supported:
            self._factors(m, take, beat, write_k, k_slot, v_slot, slot_of)

        # ---- credits and occupancy ----
        with m.If(self.step_end):
            with m.If(self.is_qk):
                m.d.sync += k_free.eq(self.kend)
            with m.Else():
                m.d.sync += v_free.eq(self.kend)
        # a row completes (+1) with its last beat; a step's end frees kend − free rows (a
        # register: both are steady during a step)
        take_row = Signal()
        m.d.comb += take_row.eq(take & beat.last)
        occs = []
        for name_, room_, inc_, free_ in (("k", k_room, take_row & write_k, k_free),
                                          ("v", v_room, take & v_row_end, v_free)):
            occ = Signal(range(ring + 1), name=f"{name_}_occ")
            rows = Signal(range(cfg.max_keys_per_step + 1), name=f"{name_}_step_rows")
            dec = self.step_end & (self.is_qk if name_ == "k" else ~self.is_qk)
            nocc = Signal(signed(occ.shape().width + 2), name=f"{name_}_occ_next")
            m.d.comb += nocc.eq(occ + inc_ - Mux(dec, rows, 0))
            m.d.sync += [rows.eq(self.kend - free_), occ.eq(nocc), room_.eq(nocc < ring)]
            occs.append((occ, room_))

        with m.If(self.clear):
            m.d.sync += [k_wr_n.eq(0), v_wr_n.eq(0), k_free.eq(0), v_free.eq(0),
                         kv_closed.eq(0), kvw.eq(0)]
            for occ, room_ in occs:
                m.d.sync += [occ.eq(0), room_.eq(1)]
        return m

    def _factors(self, m: Module, take, beat, write_k, k_slot, v_slot, slot_of) -> None:
        """The rows' factor registers (K's and, from a paged cache, V's) and their reads."""
        cfg, ring = self.cfg, self.ring
        sl = row_scale_layout(cfg)
        cmb = cfg.numerics.scale_mult_bits
        for name, is_k, slot_w, out in (("k", True, k_slot, self.k_scale),
                                        ("v", False, v_slot, self.v_scale))[
                                            :1 + cfg.value_scales_unit]:
            regs = [Signal(sl, name=f"{name}scale{j}") for j in range(ring)]
            mine = write_k if is_k else ~write_k
            # a paged cache's word of factors, and the next one's slot in it
            fword = Signal(len(beat.data.as_value()), name=f"{name}f_word")
            fidx = Signal(range(cfg.factors_per_word), name=f"{name}f_idx")
            packed = Signal(sl)
            slot = (fword.word_select(fidx, FACTOR_SLOT_BITS) if cfg.factors_per_word > 1
                    else fword[:FACTOR_SLOT_BITS])
            m.d.comb += [packed.c_m.eq(slot[:KEY_MANT_BITS] << (cmb - KEY_MANT_BITS)),
                         packed.c_sh.eq(slot[KEY_MANT_BITS:])]
            with m.If(take & mine & beat.pw):
                m.d.sync += [fword.eq(beat.data.as_value()), fidx.eq(0)]
            if cfg.factors_per_word > 1:
                with m.If(take & mine & beat.pk):
                    m.d.sync += fidx.eq(fidx + 1)
            sc = beat.sc if is_k else 0          # (V rows never carry a word of their own)
            with m.If(take & mine & (sc | beat.pk)):
                with m.Switch(slot_w):
                    for j in range(ring):
                        with m.Case(j):
                            m.d.sync += regs[j].eq(
                                Mux(sc, beat.data.as_value()[:sl.size], packed) if is_k
                                else packed)
            for cpy in range(cfg.max_keys_per_step):
                with m.Switch(slot_of(self.kbase + cpy)):
                    for j in range(ring):
                        with m.Case(j):
                            m.d.comb += out[cpy].eq(regs[j])
