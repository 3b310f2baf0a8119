"""AttenIOTop: the whole accelerator. AXI4-Lite registers, program fetch, dispatch into three
queues with dependency tokens, AXI4 DMA for Q, K/V and O, and the compute core.

docs/architecture.md draws the blocks, docs/isa.md defines what the controller runs and
docs/registers.md the register map; the cycle rules here are the ones ``sim/schedule.py``
models. Ports (flat, vendor-shell names):

* ``s_axil_*``: AXI4-Lite subordinate, 12-bit addresses, 32-bit data (hw/csr.py).
* ``m_axi_*``: AXI4 manager for data: AR/R (Q, K, V) and AW/W/B (O); INCR bursts of up to 256
  beats that never cross 4 KB, at most ``MAX_OUTSTANDING`` bursts in flight per direction, one
  ID (responses in order).
* ``m_axi_insn_ar*``, ``m_axi_insn_r*``: AXI4 manager, read only, for the program.
* ``irq``: level, ``IRQ_STATUS & IRQ_ENABLE``.

A run starts when ``CTRL.START`` is written while idle (the engines are reset that cycle) and
ends when every queue has reached ``END`` and every response is back, or after an error (the
first one is kept in ``STATUS.ERROR``) once every transaction in flight has drained. A watchdog
ends a run that makes no progress for ``2**WATCHDOG_BITS`` cycles with ``TIMEOUT``.
"""

from __future__ import annotations

from amaranth import Cat, Const, Elaboratable, Module, Mux, ResetInserter, Signal, Value, signed
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from attenio.config import HardwareConfig
from attenio.contract.program import HEADER, INSTR_BITS, LAYOUTS, SIGNED, TOKEN_MAX, Op
from attenio.contract.timing import TIMING
from attenio.errors import ErrorCode, bad
from attenio.hw.core import ComputeCore
from attenio.hw.csr import CsrBank, axi4lite_signature
from attenio.model.io_analysis import out_element_bytes
from attenio.model.rules import next_is_v

ADDR_BITS = 48
MAX_OUTSTANDING = TIMING.max_outstanding
FETCH_CHUNK = TIMING.fetch_chunk
FETCH_BUFFER = TIMING.fetch_buffer
RH_BITS = 16             # rows·heads as stored beside a decoded instruction
QUEUE_DEPTH = TIMING.queue_depth
WATCHDOG_BITS = 16


def _log2(x: int) -> int:
    return x.bit_length() - 1


def axi4_ports(prefix: str, data_bits: int, read: bool = True, write: bool = True) -> dict:
    """Flat AXI4 manager ports (``In``/``Out`` from the manager's side)."""
    ports = {}
    if read:
        ports.update({"araddr": Out(ADDR_BITS), "arlen": Out(8), "arsize": Out(3),
                      "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
                      "rdata": In(data_bits), "rresp": In(2), "rlast": In(1),
                      "rvalid": In(1), "rready": Out(1)})
    if write:
        ports.update({"awaddr": Out(ADDR_BITS), "awlen": Out(8), "awsize": Out(3),
                      "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
                      "wdata": Out(data_bits), "wstrb": Out(data_bits // 8), "wlast": Out(1),
                      "wvalid": Out(1), "wready": In(1),
                      "bresp": In(2), "bvalid": In(1), "bready": Out(1)})
    return {f"{prefix}{k}": v for k, v in ports.items()}


def check_top_config(cfg: HardwareConfig) -> None:
    """Raise ConfigError for parameters this top level does not support."""
    ab = cfg.axi_data_bytes
    word = cfg.macs_per_line * cfg.element_bytes
    if word != ab:
        raise bad("axi_data_bits", cfg.axi_data_bits,
                  f"this top level needs one Q/K/V word per AXI beat: macs_per_line × "
                  f"element bytes = {word * 8} bits")
    ow = cfg.macs_per_line * out_element_bytes(cfg)
    if ow % ab:
        raise bad("axi_data_bits", cfg.axi_data_bits,
                  f"an output word ({ow * 8} bits) must be a whole number of AXI beats")
    if 32 % ab:
        raise bad("axi_data_bits", cfg.axi_data_bits,
                  "an instruction (256 bits) must be a whole number of AXI beats (≤ 256 bits)")


class _Bursts:
    """Address generator shared by the load and store engines: the transfer at ``base`` of
    ``beats`` beats is cut into INCR bursts of at most 256 beats that never cross 4 KB.

    ``addr``, ``len`` and ``last`` (the next burst) are registers computed in two stages from the
    state (``base``, ``beats``, ``off``) of two cycles before; the engine sets ``moved`` in a cycle
    whose edge changes the state, and ``ready`` is low in the two cycles after it, while these
    and the engine's own look-ahead registers catch up. So a burst can follow the previous one
    (or the instruction's start) three cycles later (sim/schedule.py ``Timing.request_gap``).
    """

    def __init__(self, m: Module, ab: int, name: str):
        self.base = Signal(ADDR_BITS, name=f"{name}_base")
        self.beats = Signal(24, name=f"{name}_beats")      # beats of the transfer
        self.off = Signal(24, name=f"{name}_off")          # beats already requested
        self.addr = Signal(ADDR_BITS, name=f"{name}_addr")
        self.len = Signal(9, name=f"{name}_len")           # beats of the next burst
        self.last = Signal(name=f"{name}_last")            # it ends the transfer
        self.moved = Signal(name=f"{name}_moved")
        self.ready = Signal(name=f"{name}_ready")
        self.bad = Signal(name=f"{name}_bad")              # the transfer leaves the window
        # stage 1: address and beats left; stage 2: the burst's length and whether it is last
        addr = Signal(ADDR_BITS, name=f"{name}_addr1")
        left = Signal(24, name=f"{name}_left1")
        m.d.sync += [addr.eq(self.base + (self.off << _log2(ab))), left.eq(self.beats - self.off)]
        to4k = Signal(13, name=f"{name}_to4k")
        m.d.comb += to4k.eq((4096 - addr[:12]) >> _log2(ab))
        n1 = Mux(left < 256, left, 256)
        length = Mux(to4k < n1, to4k, n1)
        moved1 = Signal(name=f"{name}_moved1")
        m.d.sync += [self.addr.eq(addr), self.len.eq(length), self.last.eq(length == left),
                     moved1.eq(self.moved), self.ready.eq(~self.moved & ~moved1)]


class _Engine(Elaboratable):
    """Everything a run resets: fetch, dispatch, queues, tokens, DMA, core, counters."""

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        ab = cfg.axi_data_bytes
        self.go = Signal()
        self.abort = Signal()
        self.prog_base = Signal(64)
        self.prog_len = Signal(32)
        self.win_base = Signal(64)
        self.win_size = Signal(64)
        self.finished = Signal()
        self.drained = Signal()
        self.err = Signal(4)
        self.counters = {n: Signal(64, name=f"ctr_{n.lower()}") for n in (
            "PE_BUSY", "PE_WAIT_KV", "PE_WAIT_EXP", "EXP_BUSY", "FIN_BUSY", "DMA_RD_BUSY",
            "DMA_WR_BUSY", "BYTES_RD", "BYTES_WR")}
        self.axi_flows = {**axi4_ports("", ab * 8), **axi4_ports("insn_", ab * 8, write=False)}
        self.axi = {k: Signal(v.shape, name=f"e_{k}") for k, v in self.axi_flows.items()}

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        ab = cfg.axi_data_bytes
        lab = _log2(ab)
        q = cfg.macs_per_line
        ob = out_element_bytes(cfg)
        k_out = q * ob // ab                     # AXI beats per output word
        ipb = 32 // ab                           # AXI beats per instruction
        ring = max(1, cfg.kv_ring_depth // 2)
        a = self.axi
        m.submodules.core = core = ComputeCore(cfg)

        err = self.err
        stop = Signal()
        m.d.comb += stop.eq(err != 0)
        progress = Signal()

        def fail(code: ErrorCode):
            with m.If(err == 0):
                m.d.sync += err.eq(code)

        with m.If(self.abort & self.go):
            fail(ErrorCode.ABORTED)

        def fld(raw, op, name):
            lsb, width = LAYOUTS[op][name]
            v = raw[lsb:lsb + width]
            return v.as_signed() if name in SIGNED else v

        def flag(raw, name):
            return raw[HEADER[name][0]]

        # ---- fetch ----
        # the fetch buffer holds each instruction with its decode (below): bad_code and rows·heads
        m.submodules.ififo = ififo = fifo.SyncFIFOBuffered(width=INSTR_BITS + 4 + RH_BITS,
                                                           depth=FETCH_BUFFER)
        f_next = Signal(32)
        f_inflight = Signal(range(FETCH_BUFFER + 1))
        i_out = Signal(range(FETCH_BUFFER + 1))      # instruction bursts in flight
        f_addr = Signal(ADDR_BITS)
        f_n = Signal(range(FETCH_CHUNK + 1))
        f_left = Signal(32)
        f_4k = Signal(8)
        # the next burst (address, length, whether one is left) is a register computed from
        # f_next of the cycle before; f_ready is low in the cycle after f_next moved or the
        # engine was reset (sim/schedule.py Timing.fetch_gap, fetch_delay)
        f_addr_c = Signal(ADDR_BITS)
        f_more = Signal()
        f_ready = Signal()
        m.d.comb += [
            f_addr_c.eq(self.prog_base + (f_next << 5)),
            f_left.eq(self.prog_len - f_next),
            f_4k.eq((4096 - f_addr_c[:12]) >> 5),
        ]
        f_n1 = Mux(f_left < FETCH_CHUNK, f_left, FETCH_CHUNK)
        m.d.sync += [f_addr.eq(f_addr_c), f_n.eq(Mux(f_4k < f_n1, f_4k, f_n1)),
                     f_more.eq(f_next < self.prog_len)]
        m.d.comb += [
            a["insn_arvalid"].eq(self.go & ~stop & f_ready & f_more
                                 & (ififo.level + f_inflight <= FETCH_BUFFER - FETCH_CHUNK)),
            a["insn_araddr"].eq(f_addr), a["insn_arlen"].eq(f_n * ipb - 1),
            a["insn_arsize"].eq(lab), a["insn_arburst"].eq(1), a["insn_rready"].eq(1),
        ]
        iar = a["insn_arvalid"] & a["insn_arready"]
        ir = a["insn_rvalid"] & a["insn_rready"]
        ibuf = Signal(INSTR_BITS)
        ibeat = Signal(range(ipb))
        assembled = Cat(ibuf[ab * 8:], a["insn_rdata"]) if ipb > 1 else a["insn_rdata"]
        push_i = Signal()
        m.d.comb += push_i.eq(ir & (ibeat == ipb - 1))
        with m.If(ir):
            m.d.sync += [ibuf.eq(assembled), ibeat.eq(Mux(ibeat == ipb - 1, 0, ibeat + 1))]
            with m.If(a["insn_rresp"] != 0):
                fail(ErrorCode.AXI_READ)
        m.d.sync += f_ready.eq(~iar)
        with m.If(iar):
            m.d.sync += f_next.eq(f_next + f_n)
        # an instruction stays in flight until its decode register writes it to the buffer
        push_d = Signal()
        m.d.sync += push_d.eq(push_i)
        m.d.sync += f_inflight.eq(f_inflight + Mux(iar, f_n, 0) - push_d)
        m.d.sync += i_out.eq(i_out + iar - (ir & a["insn_rlast"]))

        # ---- dispatch ----
        queues = {}
        for name in ("load", "compute", "store"):
            queues[name] = qf = fifo.SyncFIFOBuffered(width=INSTR_BITS + RH_BITS,
                                                      depth=QUEUE_DEPTH)
            m.submodules[f"{name}_queue"] = qf
        # Decode: an assembled instruction and its rows·heads product are registered (one
        # cycle, sim/schedule.py Timing.decode_latency); its checks are computed from those
        # registers as it enters the fetch buffer, so the dispatch stage only reads a stored
        # error code.
        raw = Signal(INSTR_BITS)
        rows_heads = Signal(24)
        with m.If(push_i):
            # same bits in every tile op
            m.d.sync += [raw.eq(assembled), rows_heads.eq(assembled[16:32] * assembled[32:40])]
        op = raw[:4]
        end_seen = Signal()
        head = Signal()
        m.d.comb += head.eq(ififo.r_rdy & self.go & ~stop & ~end_seen)
        bad_code = Signal(4)
        target_ok = Signal()
        dispatch = Signal()
        m.d.comb += [ififo.w_en.eq(push_d),
                     ififo.w_data.eq(Cat(raw, bad_code, rows_heads[:RH_BITS]))]
        d_f = raw[40:52]
        kps_max = cfg.max_keys_per_step

        def kps_bad(kps):
            return (kps == 0) | ((kps & (kps - 1)) != 0) | (kps > kps_max)

        def range_checks(opc):
            c = []
            if "rows" in LAYOUTS[opc]:
                c.append((rows_heads == 0) | (rows_heads > cfg.tile_rows))
            c.append((d_f == 0) | (d_f > cfg.max_head_dim))
            if "keys" in LAYOUTS[opc]:
                keys = fld(raw, opc, "keys")
                c.append(keys > cfg.max_seq_len)
                if opc == Op.LOAD_KV:
                    c.append(keys == 0)
            if "keys_per_step" in LAYOUTS[opc]:
                kps = fld(raw, opc, "keys_per_step")
                c.append(kps_bad(kps))
                if opc != Op.LOAD_KV:
                    # rows·kps > mac_lines for a power-of-two kps > 1 (others fail above)
                    c.append(Cat(*[(kps == (1 << k)) & (rows_heads > cfg.mac_lines >> k)
                                   for k in range(1, 8)]).any())
            if opc == Op.COMPUTE:
                c.append(fld(raw, opc, "c_sh") > 62)
                # the core's causal mask takes one head's rows
                c.append(fld(raw, opc, "causal") & (raw[32:40] > 1))
            return c

        def align_checks(opc):
            return [fld(raw, opc, n)[:lab] != 0 for n in LAYOUTS[opc]
                    if n.endswith("addr") or n.endswith("stride")] if lab else []

        with m.Switch(op):
            for opc in Op:
                if opc == Op.ILLEGAL:
                    continue
                with m.Case(int(opc)):
                    used = 0xFF
                    for lsb, width in LAYOUTS[opc].values():
                        used |= ((1 << width) - 1) << lsb
                    reserved = Const(((1 << INSTR_BITS) - 1) & ~used, INSTR_BITS)
                    rng = range_checks(opc) if opc != Op.END else []
                    aln = align_checks(opc)
                    qname = {Op.LOAD_Q: "load", Op.LOAD_KV: "load", Op.COMPUTE: "compute",
                             Op.FINALIZE: "compute", Op.STORE_O: "store"}.get(opc)
                    checks = [((raw & reserved) != 0, ErrorCode.RESERVED_BITS)]
                    if rng:
                        checks.append((Cat(*rng).any(), ErrorCode.FIELD_RANGE))
                    if aln:
                        checks.append((Cat(*aln).any(), ErrorCode.ADDRESS_RANGE))
                    # a queue without a previous (load) or next (store) neighbour
                    missing = {"load": "prev", "store": "next"}.get(qname)
                    if missing:
                        checks.append((flag(raw, f"pop_{missing}"), ErrorCode.TOKEN_UNDERFLOW))
                        checks.append((flag(raw, f"push_{missing}"), ErrorCode.TOKEN_OVERFLOW))
                    # the first failing check names the error (later assignments win)
                    for cond, code in reversed(checks):
                        with m.If(cond):
                            m.d.comb += bad_code.eq(int(code))
            with m.Default():
                m.d.comb += bad_code.eq(ErrorCode.ILLEGAL_OPCODE)
        # dispatch: the fetch buffer's head, its stored error code, room in its queue
        hraw = ififo.r_data[:INSTR_BITS]
        h_bad = ififo.r_data[INSTR_BITS:INSTR_BITS + 4]
        h_rh = ififo.r_data[INSTR_BITS + 4:]
        hop = hraw[:4]
        with m.Switch(hop):
            for opc in Op:
                if opc == Op.ILLEGAL:
                    continue
                with m.Case(int(opc)):
                    qname = {Op.LOAD_Q: "load", Op.LOAD_KV: "load", Op.COMPUTE: "compute",
                             Op.FINALIZE: "compute", Op.STORE_O: "store"}.get(opc)
                    if opc == Op.END:
                        m.d.comb += target_ok.eq(queues["load"].w_rdy & queues["compute"].w_rdy
                                                 & queues["store"].w_rdy)
                    else:
                        m.d.comb += target_ok.eq(queues[qname].w_rdy)
        with m.If(head & (h_bad != 0)):
            fail(h_bad)
        m.d.comb += dispatch.eq(head & (h_bad == 0) & target_ok)
        m.d.comb += ififo.r_en.eq(dispatch | (ififo.r_rdy & (stop | end_seen)))
        for name, qf in queues.items():
            ops = {"load": (Op.LOAD_Q, Op.LOAD_KV), "compute": (Op.COMPUTE, Op.FINALIZE),
                   "store": (Op.STORE_O,)}[name]
            mine = Cat(*[hop == int(o) for o in ops + (Op.END,)]).any()
            m.d.comb += [qf.w_data.eq(Cat(hraw, h_rh)), qf.w_en.eq(dispatch & mine)]
        with m.If(dispatch & (hop == int(Op.END))):
            m.d.sync += end_seen.eq(1)
        # the program ends without END: every instruction fetched and dispatched
        with m.If(self.go & ~end_seen & (f_next >= self.prog_len) & (f_inflight == 0)
                  & (ififo.level == 0)):
            fail(ErrorCode.PROGRAM_OVERRUN)

        # ---- tokens ----
        pairs = [("load", "compute"), ("compute", "load"), ("compute", "store"),
                 ("store", "compute")]
        tok = {p: Signal(range(TOKEN_MAX + 1), name=f"tok_{p[0][0]}{p[1][0]}") for p in pairs}
        inc = {p: Signal(name=f"inc_{p[0][0]}{p[1][0]}") for p in pairs}
        dec = {p: Signal(name=f"dec_{p[0][0]}{p[1][0]}") for p in pairs}
        quiet = {n: Signal(name=f"{n}_quiet") for n in ("load", "compute", "store")}
        for p in pairs:
            m.d.sync += tok[p].eq(tok[p] + inc[p] - dec[p])
            with m.If(inc[p] & ~dec[p] & (tok[p] == TOKEN_MAX)):
                fail(ErrorCode.TOKEN_OVERFLOW)
        prev_q = {"load": None, "compute": "load", "store": "compute"}
        next_q = {"load": "compute", "compute": "store", "store": None}

        def pops(name, raw_):
            """(tokens available, underflow) for the head instruction of queue ``name``."""
            ok, under = [], []
            for fl, other in (("pop_prev", prev_q[name]), ("pop_next", next_q[name])):
                if other is None:
                    continue
                need = flag(raw_, fl)
                have = tok[(other, name)] != 0
                ok.append(~need | have)
                under.append(need & ~have & quiet[other])
            return Cat(*ok).all(), Cat(*under).any()

        def take(name, raw_, when):
            for fl, other in (("pop_prev", prev_q[name]), ("pop_next", next_q[name])):
                if other is not None:
                    m.d.comb += dec[(other, name)].eq(when & flag(raw_, fl))

        def give(name, raw_, when):
            for fl, other in (("push_prev", prev_q[name]), ("push_next", next_q[name])):
                if other is not None:
                    with m.If(when & flag(raw_, fl)):
                        m.d.comb += inc[(name, other)].eq(1)

        # ---- window check: per transfer (base, beats), a register beside the bursts ----
        win_on = Signal()
        win_end = Signal(65)
        m.d.sync += [win_on.eq(self.win_size != 0), win_end.eq(self.win_base + self.win_size)]

        def outside(base, beats):
            return win_on & ((base < self.win_base) | (base + (beats << lab) > win_end))

        def request(ch: str, want, bursts: _Bursts):
            """Drive an AXI address channel (``ar``/``aw``) with the next burst of ``bursts``
            when ``want``; a transfer outside the window fails instead, before any of its
            bursts. Returns the handshake."""
            m.d.sync += bursts.bad.eq(outside(bursts.base, bursts.beats))
            with m.If(want & bursts.bad):
                fail(ErrorCode.ADDRESS_RANGE)
            m.d.comb += [
                a[f"{ch}valid"].eq(want & ~bursts.bad), a[f"{ch}addr"].eq(bursts.addr),
                a[f"{ch}len"].eq(bursts.len - 1), a[f"{ch}size"].eq(lab), a[f"{ch}burst"].eq(1),
            ]
            return a[f"{ch}valid"] & a[f"{ch}ready"]

        words_of = lambda d: (d + (q - 1)) >> _log2(q)  # noqa: E731

        # ---- load engine (LOAD_Q, LOAD_KV) ----
        lq = queues["load"]
        lraw = Signal(INSTR_BITS)
        lbusy = Signal()
        load_end = Signal()
        rd_out = Signal(range(MAX_OUTSTANDING + 1))
        lb = _Bursts(m, ab, "ld")
        l_is_kv = Signal()
        l_rows = Signal(24)        # rows of the current unit (Q: rows; KV: keys of the block)
        l_trow = Signal(16)        # row inside the unit (row-by-row transfers)
        l_unit_first = Signal()
        l_wd = Signal(12)
        l_contig = Signal()
        l_stride = Signal(32)
        # Q: heads
        l_h = Signal(8)
        l_hbase = Signal(ADDR_BITS)
        # KV: steps
        l_b = Signal(range(kps_max + 1))
        l_steps = Signal(25)
        l_ks = Signal(25)
        l_vs = Signal(25)
        l_kbase = Signal(ADDR_BITS)
        l_vbase = Signal(ADDR_BITS)
        l_on_v = Signal()          # the current unit is a V block
        m.d.comb += l_wd.eq(words_of(lraw[40:52]))

        lhead = lq.r_data
        lop = lhead[:4]
        l_ok, l_under = pops("load", lhead)
        core_q = core.qcmd
        l_start = Signal()
        l_pop_end = Signal()
        l_is_q_head = lop == int(Op.LOAD_Q)
        m.d.comb += [
            core_q.payload.rows.eq(rows_heads_of(lhead)),
            core_q.payload.d.eq(lhead[40:52]),
            core_q.payload.kps_log2.eq(kps_log2_of(fld(lhead, Op.LOAD_Q, "keys_per_step"),
                                                   kps_max)),
        ]
        with m.If(lq.r_rdy & ~lbusy & ~load_end & self.go & ~stop):
            with m.If(lop == int(Op.END)):
                m.d.comb += l_pop_end.eq(1)
                m.d.sync += load_end.eq(1)
            # ok and underflow exclude each other; testing ok first keeps the other engines'
            # state (underflow needs "the producer has ended") off the start path
            with m.Elif(l_ok):
                m.d.comb += core_q.valid.eq(l_is_q_head)
                m.d.comb += l_start.eq(~l_is_q_head | core_q.ready)
            with m.Elif(l_under):
                fail(ErrorCode.TOKEN_UNDERFLOW)
        take("load", lhead, l_start)
        m.d.comb += lq.r_en.eq(l_pop_end | l_start)
        wd_head = words_of(lhead[40:52])
        # keys of a K/V instruction's first block: at most keys_per_step ≤ max_keys_per_step
        # (decode refuses more), so the block's beat count is a narrow product, not a DSP
        nk0 = Signal(range(kps_max + 1))
        keys_h, kps_h = fld(lhead, Op.LOAD_KV, "keys"), fld(lhead, Op.LOAD_KV, "keys_per_step")
        m.d.comb += nk0.eq(Mux(keys_h < kps_h, keys_h, kps_h))
        with m.If(l_start):
            m.d.sync += [lraw.eq(lhead), lbusy.eq(1), l_trow.eq(0), l_unit_first.eq(1),
                         lb.off.eq(0), l_h.eq(0), l_ks.eq(0), l_vs.eq(0), l_on_v.eq(0)]
            with m.If(l_is_q_head):
                addr = fld(lhead, Op.LOAD_Q, "addr")
                stride = fld(lhead, Op.LOAD_Q, "row_stride")
                rows = fld(lhead, Op.LOAD_Q, "rows")
                contig = stride == (wd_head << lab)
                m.d.sync += [l_is_kv.eq(0), l_hbase.eq(addr), lb.base.eq(addr),
                             l_rows.eq(rows), l_contig.eq(contig), l_stride.eq(stride),
                             lb.beats.eq(Mux(contig, rows * wd_head, wd_head))]
            with m.Else():
                kaddr = fld(lhead, Op.LOAD_KV, "k_addr")
                stride = fld(lhead, Op.LOAD_KV, "row_stride")
                keys, kps = keys_h, kps_h
                contig = stride == (wd_head << lab)
                m.d.sync += [l_is_kv.eq(1), l_kbase.eq(kaddr), lb.base.eq(kaddr),
                             l_vbase.eq(fld(lhead, Op.LOAD_KV, "v_addr")), l_b.eq(kps),
                             l_steps.eq((keys + kps - 1) >> kps_log2_of(kps, kps_max)),
                             l_rows.eq(nk0), l_contig.eq(contig), l_stride.eq(stride),
                             lb.beats.eq(Mux(contig, nk0 * wd_head, wd_head))]
        # credits for the K/V ring: block s of b keys waits until s·b + b ≤ freed + ring
        # (the left side, less the ring, is a register: it depends on the unit only)
        cur_s = Mux(l_on_v, l_vs, l_ks)
        need = Signal(signed(28))
        m.d.sync += need.eq(cur_s * l_b + l_b - ring)
        credit = Signal()
        m.d.comb += credit.eq(~l_is_kv | ~l_unit_first
                              | (need <= Mux(l_on_v, core.v_free, core.k_free)))
        m.submodules.tags = tags = fifo.SyncFIFOBuffered(width=32, depth=MAX_OUTSTANDING)
        l_want = Signal()
        m.d.comb += l_want.eq(lbusy & lb.ready & ~stop & credit & (rd_out < MAX_OUTSTANDING)
                              & tags.w_rdy)
        ar = request("ar", l_want, lb)
        m.d.comb += lb.moved.eq(l_start | ar)
        # What follows the current unit, as registers: the unit changes only with a request or
        # the instruction's start, and the next request is three cycles later (lb.ready).
        # K/V: K(ks) if ks < steps and ks ≤ vs + 1, else V(vs).
        p_row_last = Signal()       # the current row is the unit's last
        p_nks, p_nvs = Signal.like(l_ks), Signal.like(l_vs)
        p_next_v = Signal()
        p_kv_last = Signal()        # the next unit would be past the instruction's end
        p_q_last = Signal()         # the current head is the last
        p_kbase, p_vbase, p_base = (Signal(ADDR_BITS, name=f"ld_next_{x}")
                                    for x in ("kbase", "vbase", "base"))
        p_rows = Signal(range(kps_max + 1))
        p_beats = Signal.like(lb.beats)
        p_hbase = Signal(ADDR_BITS)
        p_rowbase = Signal(ADDR_BITS)
        # two register stages: (1) which block is next, its index and addresses; (2) its
        # size, base and whether it ends the instruction (the unit waits 3 cycles: lb.ready)
        nks, nvs = Signal.like(l_ks), Signal.like(l_vs)
        m.d.comb += [nks.eq(l_ks + ~l_on_v), nvs.eq(l_vs + l_on_v)]
        next_v = Signal()
        m.d.comb += next_v.eq(next_is_v(nks, nvs, l_steps))
        step_bytes = l_stride * l_b
        s1_ns = Signal.like(l_ks)
        m.d.sync += [
            p_row_last.eq(l_trow == l_rows - 1), p_nks.eq(nks), p_nvs.eq(nvs),
            p_next_v.eq(next_v), s1_ns.eq(Mux(next_v, nvs, nks)),
            p_q_last.eq(l_h == fld(lraw, Op.LOAD_Q, "heads") - 1),
            p_kbase.eq(l_kbase + Mux(l_on_v, 0, step_bytes)),
            p_vbase.eq(l_vbase + Mux(l_on_v, step_bytes, 0)),
            p_hbase.eq(l_hbase + fld(lraw, Op.LOAD_Q, "head_stride")),
            p_rowbase.eq(lb.base + l_stride),
        ]
        keys_l = fld(lraw, Op.LOAD_KV, "keys")
        nk_left = Signal(25)
        m.d.comb += nk_left.eq(keys_l - s1_ns * l_b)
        nk_rows = Signal(range(kps_max + 1))   # ≤ keys per step
        m.d.comb += nk_rows.eq(Mux(nk_left < l_b, nk_left, l_b))
        m.d.sync += [
            p_kv_last.eq(p_next_v & (p_nvs >= l_steps)),
            p_base.eq(Mux(p_next_v, p_vbase, p_kbase)),
            p_rows.eq(nk_rows), p_beats.eq(Mux(l_contig, nk_rows * l_wd, l_wd)),
        ]
        unit_done = Signal()
        instr_done = Signal()
        m.d.comb += unit_done.eq(lb.last & (l_contig | p_row_last))
        m.d.comb += instr_done.eq(unit_done & Mux(l_is_kv, p_kv_last, p_q_last))
        with m.If(ar):
            m.d.sync += [lb.off.eq(lb.off + lb.len), l_unit_first.eq(0)]
            with m.If(lb.last):
                m.d.sync += lb.off.eq(0)
                with m.If(instr_done):
                    m.d.sync += lbusy.eq(0)
                with m.Elif(~unit_done):            # next row of the unit
                    m.d.sync += [l_trow.eq(l_trow + 1), lb.base.eq(p_rowbase)]
                with m.Elif(~l_is_kv):                # next head
                    m.d.sync += [l_h.eq(l_h + 1), l_hbase.eq(p_hbase), lb.base.eq(p_hbase),
                                 l_trow.eq(0), l_unit_first.eq(1)]
                with m.Else():                       # next K/V block
                    m.d.sync += [l_ks.eq(p_nks), l_vs.eq(p_nvs), l_on_v.eq(p_next_v),
                                 l_kbase.eq(p_kbase), l_vbase.eq(p_vbase),
                                 lb.base.eq(p_base), l_rows.eq(p_rows),
                                 lb.beats.eq(p_beats), l_trow.eq(0), l_unit_first.eq(1)]
        # a tag per burst: where its beats go and what its last beat means
        d_l = lraw[40:52]
        lastlanes = d_l - ((l_wd - 1) << _log2(q))
        m.d.comb += [
            tags.w_en.eq(ar),
            tags.w_data.eq(Cat(l_is_kv, l_on_v, l_wd.as_unsigned()[:12], lastlanes[:8],
                               instr_done, flag(lraw, "push_next"))),
        ]
        t = tags.r_data
        t_kv, t_v, t_wd, t_lanes, t_end, t_push = t[0], t[1], t[2:14], t[14:22], t[22], t[23]
        rw = Signal(12)
        row_last = Signal()
        m.d.comb += row_last.eq(rw == t_wd - 1)
        beat_ok = a["rvalid"] & tags.r_rdy
        m.d.comb += [
            core.q.valid.eq(beat_ok & ~stop & ~t_kv),
            core.kv.valid.eq(beat_ok & ~stop & t_kv),
            core.kv.payload.v.eq(t_v), core.kv.payload.last.eq(row_last),
            core.kv.payload.end.eq(t_end & a["rlast"]),
            a["rready"].eq(tags.r_rdy & (stop | Mux(t_kv, core.kv.ready, core.q.ready))),
        ]
        for lane in range(q):
            elem = a["rdata"][lane * cfg.data_bits:(lane + 1) * cfg.data_bits]
            m.d.comb += [core.q.payload[lane].eq(elem),
                         core.kv.payload.data[lane].eq(Mux(~row_last | (lane < t_lanes), elem, 0))]
        r = a["rvalid"] & a["rready"]
        with m.If(r):
            m.d.sync += rw.eq(Mux(row_last, 0, rw + 1))
            with m.If(a["rresp"] != 0):
                fail(ErrorCode.AXI_READ)
        r_burst_end = r & a["rlast"]
        m.d.comb += tags.r_en.eq(r_burst_end)
        m.d.sync += rd_out.eq(rd_out + ar - r_burst_end)
        with m.If(r_burst_end & t_end & t_push & ~stop):
            m.d.comb += inc[("load", "compute")].eq(1)
        m.d.comb += quiet["load"].eq(load_end & (rd_out == 0))

        # ---- compute engine (COMPUTE, FINALIZE) ----
        cq = queues["compute"]
        chead = cq.r_data
        cop = chead[:4]
        craw = Signal(INSTR_BITS)
        c_state = Signal(range(3))           # 0 idle, 1 waiting for the steps, 2 for idle
        comp_end = Signal()
        c_ok, c_under = pops("compute", chead)
        c_start = Signal()
        c_pop_end = Signal()
        cmd = core.cmd.payload
        m.d.comb += [
            cmd.rows.eq(rows_heads_of(chead)), cmd.d.eq(chead[40:52]),
            cmd.keys.eq(fld(chead, Op.COMPUTE, "keys")), cmd.c_m.eq(fld(chead, Op.COMPUTE, "c_m")),
            cmd.c_sh.eq(fld(chead, Op.COMPUTE, "c_sh")),
            cmd.causal.eq(fld(chead, Op.COMPUTE, "causal")),
            cmd.q_pos.eq(fld(chead, Op.COMPUTE, "q_pos")),
            cmd.diag.eq(fld(chead, Op.COMPUTE, "diag")),
            cmd.kps_log2.eq(kps_log2_of(fld(chead, Op.COMPUTE, "keys_per_step"), kps_max)),
        ]
        with m.If(cq.r_rdy & (c_state == 0) & ~comp_end & self.go & ~stop):
            with m.If(cop == int(Op.END)):
                m.d.comb += c_pop_end.eq(1)
                m.d.sync += comp_end.eq(1)
            with m.Elif(c_ok):
                with m.If(cop == int(Op.COMPUTE)):
                    m.d.comb += core.cmd.valid.eq(1)
                    m.d.comb += c_start.eq(core.cmd.ready)
                with m.Else():
                    m.d.comb += c_start.eq(1)
            with m.Elif(c_under):
                fail(ErrorCode.TOKEN_UNDERFLOW)
        take("compute", chead, c_start)
        m.d.comb += cq.r_en.eq(c_pop_end | c_start)
        with m.If(c_start):
            m.d.sync += [craw.eq(chead), c_state.eq(Mux(cop == int(Op.COMPUTE), 1, 2))]
        c_end = Signal()
        with m.If((c_state == 1) & core.busy & core.steps_done):
            m.d.comb += c_end.eq(1)
        with m.If((c_state == 2) & ~core.busy):
            m.d.comb += c_end.eq(1)
        with m.If(c_end):
            m.d.sync += c_state.eq(0)
        give("compute", craw, c_end & ~stop)
        m.d.comb += quiet["compute"].eq(comp_end)

        # ---- store engine (STORE_O) ----
        sq = queues["store"]
        shead = sq.r_data
        sop = shead[:4]
        sraw = Signal(INSTR_BITS)
        s_busy = Signal()
        s_wait = Signal()
        store_end = Signal()
        s_ok, s_under = pops("store", shead)
        s_start = Signal()
        s_pop_end = Signal()
        sb = _Bursts(m, ab, "st")
        s_h = Signal(8)
        s_hbase = Signal(ADDR_BITS)
        s_trow = Signal(16)
        s_contig = Signal()
        wr_out = Signal(range(MAX_OUTSTANDING + 1))
        s_out = Signal(range(MAX_OUTSTANDING + 1))   # this instruction's bursts in flight
        with m.If(sq.r_rdy & ~s_busy & ~store_end & self.go & ~stop):
            with m.If(sop == int(Op.END)):
                m.d.comb += s_pop_end.eq(1)
                m.d.sync += store_end.eq(1)
            with m.Elif(s_ok):
                m.d.comb += s_start.eq(1)
            with m.Elif(s_under):
                fail(ErrorCode.TOKEN_UNDERFLOW)
        take("store", shead, s_start)
        m.d.comb += sq.r_en.eq(s_pop_end | s_start)
        wd_shead = words_of(shead[40:52]) * k_out
        with m.If(s_start):
            addr = fld(shead, Op.STORE_O, "addr")
            stride = fld(shead, Op.STORE_O, "row_stride")
            contig = stride == (wd_shead << lab)
            rows = fld(shead, Op.STORE_O, "rows")
            m.d.sync += [sraw.eq(shead), s_busy.eq(1), s_wait.eq(0), s_h.eq(0),
                         s_hbase.eq(addr), sb.base.eq(addr), sb.off.eq(0), s_trow.eq(0),
                         s_contig.eq(contig), sb.beats.eq(Mux(contig, rows * wd_shead, wd_shead))]
        m.submodules.wq = wq = fifo.SyncFIFOBuffered(width=9, depth=MAX_OUTSTANDING)
        s_want = Signal()
        s_first = Signal()   # the instruction's first burst: it waits for the first output word
        with m.If(s_start):
            m.d.sync += s_first.eq(1)
        m.d.comb += s_want.eq(s_busy & sb.ready & ~s_wait & ~stop & (wr_out < MAX_OUTSTANDING)
                              & wq.w_rdy & (~s_first | core.o.valid))
        aw = request("aw", s_want, sb)
        m.d.comb += sb.moved.eq(s_start | aw)
        with m.If(aw):
            m.d.sync += s_first.eq(0)
        # what follows the current row, as registers (the state moves only with a request)
        s_row_last, s_head_last = Signal(), Signal()
        s_rowbase, s_nhbase = Signal(ADDR_BITS), Signal(ADDR_BITS)
        m.d.sync += [
            s_row_last.eq(s_trow == fld(sraw, Op.STORE_O, "rows") - 1),
            s_head_last.eq(s_h == fld(sraw, Op.STORE_O, "heads") - 1),
            s_rowbase.eq(sb.base + fld(sraw, Op.STORE_O, "row_stride")),
            s_nhbase.eq(s_hbase + fld(sraw, Op.STORE_O, "head_stride")),
        ]
        s_unit_done = sb.last & (s_contig | s_row_last)
        with m.If(aw):
            m.d.sync += sb.off.eq(sb.off + sb.len)
            with m.If(sb.last):
                m.d.sync += sb.off.eq(0)
                with m.If(s_unit_done & s_head_last):
                    m.d.sync += s_wait.eq(1)
                with m.Elif(~s_unit_done):
                    m.d.sync += [s_trow.eq(s_trow + 1), sb.base.eq(s_rowbase)]
                with m.Else():
                    m.d.sync += [s_h.eq(s_h + 1), s_hbase.eq(s_nhbase), sb.base.eq(s_nhbase),
                                 s_trow.eq(0)]
        m.d.comb += [wq.w_en.eq(aw), wq.w_data.eq(sb.len)]
        # W: output words cut into beats
        wcnt = Signal(9)
        part = Signal(range(max(2, k_out)))
        packed = Cat(*[_sext(core.o.payload[i], ob * 8) for i in range(q)])
        w_ok = Signal()
        m.d.comb += w_ok.eq(wq.r_rdy & (stop | core.o.valid))
        wlast = wcnt == wq.r_data - 1
        m.d.comb += [
            a["wvalid"].eq(w_ok), a["wlast"].eq(wlast),
            a["wstrb"].eq(Mux(stop, 0, (1 << ab) - 1)),
        ]
        with m.Switch(part):
            for j in range(k_out):
                with m.Case(j):
                    m.d.comb += a["wdata"].eq(packed[j * ab * 8:(j + 1) * ab * 8])
        w = a["wvalid"] & a["wready"]
        m.d.comb += core.o.ready.eq(w & ~stop & (part == k_out - 1))
        with m.If(w):
            m.d.sync += [wcnt.eq(Mux(wlast, 0, wcnt + 1)),
                         part.eq(Mux(part == k_out - 1, 0, part + 1))]
        m.d.comb += wq.r_en.eq(w & wlast)
        b = a["bvalid"] & a["bready"]
        m.d.comb += a["bready"].eq(1)
        with m.If(b & (a["bresp"] != 0)):
            fail(ErrorCode.AXI_WRITE)
        m.d.sync += [wr_out.eq(wr_out + aw - b), s_out.eq(s_out + aw - b)]
        s_end = Signal()
        m.d.comb += s_end.eq(s_busy & s_wait & (s_out == 0))
        with m.If(s_end):
            m.d.sync += s_busy.eq(0)
        give("store", sraw, s_end & ~stop)
        m.d.comb += quiet["store"].eq(store_end)

        # ---- end of run, drain, watchdog ----
        m.d.comb += [
            self.finished.eq(load_end & comp_end & store_end & (rd_out == 0) & (i_out == 0)
                             & (wr_out == 0) & ~wq.r_rdy & ~core.busy & ~stop),
        ]
        wd = Signal(WATCHDOG_BITS)
        m.d.comb += progress.eq(iar | ir | ar | r | aw | w | b | dispatch | core.active
                                | l_start | c_start | s_start)
        progress_r = Signal()     # registered: off the engines' issue paths
        m.d.sync += progress_r.eq(progress)
        m.d.sync += wd.eq(Mux(progress_r | ~self.go, 0, wd + 1))
        timed_out = wd == (1 << WATCHDOG_BITS) - 1
        with m.If(self.go & timed_out):
            fail(ErrorCode.TIMEOUT)
        m.d.comb += self.drained.eq(((rd_out == 0) & (i_out == 0) & (wr_out == 0) & ~wq.r_rdy)
                                    | timed_out)

        # ---- counters ----
        ctr = self.counters
        for name in ("PE_BUSY", "PE_WAIT_KV", "PE_WAIT_EXP", "EXP_BUSY", "FIN_BUSY"):
            m.d.comb += ctr[name].eq(getattr(core, name.lower()))
        m.d.sync += [
            ctr["DMA_RD_BUSY"].eq(ctr["DMA_RD_BUSY"] + r),
            ctr["DMA_WR_BUSY"].eq(ctr["DMA_WR_BUSY"] + w),
            ctr["BYTES_RD"].eq(ctr["BYTES_RD"] + Mux(r, ab, 0)),
            ctr["BYTES_WR"].eq(ctr["BYTES_WR"] + Mux(w & ~stop, ab, 0)),
        ]
        self.dbg = {"f_next": f_next, "lbusy": lbusy, "c_state": c_state, "s_busy": s_busy,
                    "rd_out": rd_out, "wr_out": wr_out, "load_end": load_end,
                    "comp_end": comp_end, "store_end": store_end, "end_seen": end_seen}
        return m


def _sext(v, bits):
    """A signed value sign-extended (or truncated) to ``bits`` bits."""
    v = Value.cast(v)
    return v[:bits] if len(v) >= bits else Cat(v, v[-1].replicate(bits - len(v)))


def rows_heads_of(entry):
    """rows·heads of a queue entry (computed at decode, stored after the instruction)."""
    return entry[INSTR_BITS:INSTR_BITS + RH_BITS]


def kps_log2_of(kps, kps_max: int):
    """log2 of a power-of-two keys_per_step field (0 for anything else; dispatch rejects it)."""
    out = Const(0, max(1, (kps_max.bit_length() - 1).bit_length()))
    for k in range(1, _log2(kps_max) + 1):
        out = Mux(kps == (1 << k), k, out)
    return out


class AttenIOTop(wiring.Component):
    """The accelerator: registers, controller, DMA and compute core behind AXI ports.

    Raises
    ------
    ConfigError
        A configuration this top level cannot build (see :func:`check_top_config`) or the
        compute core rejects.
    """

    def __init__(self, cfg: HardwareConfig):
        check_top_config(cfg)
        self.cfg = cfg
        ab = cfg.axi_data_bytes
        lite = {f"s_axil_{k}": (In(v.shape) if v.flow == Out else Out(v.shape))
                for k, v in axi4lite_signature().members.items()}
        super().__init__({**lite, **axi4_ports("m_axi_", ab * 8),
                          **axi4_ports("m_axi_insn_", ab * 8, write=False), "irq": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.csr = csr = CsrBank(cfg)
        for k in axi4lite_signature().members:
            port = getattr(self, f"s_axil_{k}")
            inner = getattr(csr.axil, k)
            if axi4lite_signature().members[k].flow == Out:
                m.d.comb += inner.eq(port)
            else:
                m.d.comb += port.eq(inner)
        eng_rst = Signal()
        eng = _Engine(cfg)
        m.submodules.engine = ResetInserter(eng_rst)(eng)
        for k, sig in eng.axi.items():
            port = getattr(self, f"m_axi_{k}")
            if eng.axi_flows[k].flow == In:
                m.d.comb += sig.eq(port)
            else:
                m.d.comb += port.eq(sig)

        busy = Signal()
        done = Signal()
        refused = Signal()
        start = csr.ctrl[0]
        m.d.comb += [
            eng_rst.eq(start & ~busy),
            eng.go.eq(busy), eng.abort.eq(csr.ctrl[1]),
            eng.prog_base.eq(Cat(csr.prog_base_lo, csr.prog_base_hi)),
            eng.prog_len.eq(csr.prog_len),
            eng.win_base.eq(Cat(csr.win_base_lo, csr.win_base_hi)),
            eng.win_size.eq(Cat(csr.win_size_lo, csr.win_size_hi)),
        ]
        cycles = Signal(64)
        end = busy & (eng.finished | ((eng.err != 0) & eng.drained))
        with m.If(start & ~busy):
            m.d.sync += [busy.eq(1), done.eq(0), refused.eq(0), cycles.eq(0)]
        with m.Elif(start & busy):
            m.d.sync += refused.eq(1)
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(end):
            m.d.sync += [busy.eq(0), done.eq(1)]
        m.d.comb += [
            csr.status.eq(Cat(busy, done, Const(0, 6), eng.err, Const(0, 4), refused)),
            csr.irq_status_set.eq(end),
            self.irq.eq((csr.irq_status & csr.irq_enable) != 0),
            csr.cycles.eq(cycles),
        ]
        for name, sig in eng.counters.items():
            m.d.comb += getattr(csr, name.lower()).eq(sig)
        self.engine = eng
        return m
