"""Testbench for ComputeCore in the Amaranth simulator: streams with random gaps, the model
as the scoreboard (ref_/rtl_ pair for a whole tile sequence)."""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from attenio.base.config import HardwareConfig
from attenio.contract import formats
from attenio.contract.rules import kv_order
from attenio.hw.core import ComputeCore
from attenio.model import numerics as nm
from attenio.model.io_analysis import query_tiles, tile_keys


def _words(row, q):
    """A row as beats of q elements (the last one zero-padded)."""
    padded = list(row) + [0] * (-len(row) % q)
    return [padded[i:i + q] for i in range(0, len(padded), q)]


def scale_word(cfg, c_m: int, c_sh: int) -> list[int]:
    """The word after a Q row with per-row scales (contract.formats.scale_word), as the
    word's signed lanes (the core's ports carry it so)."""
    x, bits = formats.scale_word(cfg, c_m, c_sh), cfg.data_bits
    lanes = [(x >> (bits * i)) & ((1 << bits) - 1) for i in range(cfg.macs_per_line)]
    return [v - (1 << bits) if v >> (bits - 1) else v for v in lanes]


def tiles_for(cfg: HardwareConfig, nq: int, nk: int, causal: bool):
    return [(p0, r, tile_keys(p0, r, nq, nk, causal, 1))
            for p0, r in query_tiles(nq, cfg.tile_rows, causal)]


def ref_core(cfg, q, k, v, sp, causal=False):
    return nm.attention_head_stepwise(cfg, q, k, v, sp, causal)


def rtl_core(cfg, q, k, v, sp, causal=False, seed=0, p_idle=0.2, p_backpressure=0.2,
             stats=None, max_cycles=2_000_000, keys_per_step=1, hold_output=0):
    """Run every tile of one head through the core; return the outputs (nq, d).
    ``hold_output``: keep the output's READY low that many cycles from its first VALID (then
    ``stats`` gets the cycle the first word was issued to the finalize unit, ``fin_first``,
    of its first VALID, ``o_first``, and the words issued by the hold's end, ``fin_held``)."""
    nq, d = q.shape
    nk, dv = k.shape[0], v.shape[1]          # V (and O) may have a head dim of their own
    qw = cfg.macs_per_line
    dut = ComputeCore(cfg)
    tiles = tiles_for(cfg, nq, nk, causal)
    cmds, qcmds, q_beats, kv_beats = [], [], [], []
    b = keys_per_step
    assert b & (b - 1) == 0, "keys per step is a power of two"
    for p0, r, keys in tiles:
        assert b == 1 or r * b <= cfg.mac_lines, "several keys per step need rows·b ≤ lines"
        rs = int(sp.per_row)
        cmds.append({"rows": r, "d": d, "dv": dv, "keys": keys, "c_m": 0 if rs else sp.c_m,
                     "c_sh": 0 if rs else sp.c_sh, "causal": int(causal), "q_pos": p0,
                     "diag": nk - nq, "kps_log2": b.bit_length() - 1, "row_scales": rs})
        qcmds.append({"rows": r, "d": d, "kps_log2": b.bit_length() - 1, "row_scales": rs})
        for j, row in enumerate(q[p0:p0 + r]):
            q_beats += _words(row, qw)
            if rs:
                q_beats.append(scale_word(cfg, sp.c_m[p0 + j], sp.c_sh[p0 + j]))
        steps = -(-keys // b)

        def rows_of(st, keys=keys):
            return range(st * b, min(keys, st * b + b))

        order = [(which.lower(), j) for which, st in kv_order(steps) for j in rows_of(st)]
        tile_beats = []
        for which, j in order:
            ws = _words((k if which == "k" else v)[j], qw)
            tile_beats += [{"data": w, "v": int(which == "v"), "last": int(i == len(ws) - 1),
                            "end": 0} for i, w in enumerate(ws)]
        if tile_beats:
            tile_beats[-1]["end"] = 1
        kv_beats += tile_beats
    words_per_row = -(-dv // qw)            # the output rows: V's head dim
    total_out = nq * words_per_row
    got = []
    rng = np.random.default_rng(seed)
    marks = {}
    state = {}
    clock = {"now": 0}

    async def drive(ctx, port, beats, name):
        for i, b in enumerate(beats):
            # a tile's command follows its Q command, as the program's load→compute token
            # orders them (COMPUTE pops the token LOAD_Q pushes): a command first would take
            # the core while the Q buffer waits for it to be free, which the program forbids
            while name == "cmd" and len(marks.get("qcmd", [])) <= i:
                ctx.set(port.valid, 0)
                await ctx.tick()
            while rng.random() < p_idle:
                ctx.set(port.valid, 0)
                await ctx.tick()
            ctx.set(port.payload, b)
            ctx.set(port.valid, 1)
            await ctx.tick().until(port.ready)
            marks.setdefault(name, []).append(clock["now"])
            if name == "kv" and "first_kv" not in marks:
                marks["first_kv"] = ctx.get(dut.pe_busy)
        ctx.set(port.valid, 0)

    async def drive_cmd(ctx):
        await drive(ctx, dut.cmd, cmds, "cmd")

    async def drive_qcmd(ctx):
        await drive(ctx, dut.qcmd, qcmds, "qcmd")

    async def drive_q(ctx):
        await drive(ctx, dut.q, q_beats, "q")

    async def drive_kv(ctx):
        await drive(ctx, dut.kv, kv_beats, "kv")

    async def consume(ctx):
        cycles = 0
        started = None
        hold = {"fin_first": None, "o_first": None, "until": None}
        while len(got) < total_out:
            if cycles >= max_cycles:  # a hang fails the test instead of running forever
                state.update({n: ctx.get(s) for n, s in dut.dbg.items()})
                return
            held = hold["until"] is None or cycles < hold["until"]
            ctx.set(dut.o.ready, 0 if hold_output and held
                    else int(rng.random() >= p_backpressure))
            _, _, valid, ready, payload, kv_v, kv_r, fin = await ctx.tick().sample(
                dut.o.valid, dut.o.ready, dut.o.payload, dut.kv.valid, dut.kv.ready,
                dut.fin_busy)
            if hold_output:
                if fin and hold["fin_first"] is None:
                    hold["fin_first"] = cycles - 1     # the counter counts the cycle after
                if valid and hold["o_first"] is None:
                    hold["o_first"], hold["until"] = cycles, cycles + hold_output
                if hold["until"] is not None and cycles == hold["until"] - 1 and stats is not None:
                    stats.update({k: hold[k] for k in ("fin_first", "o_first")}, fin_held=fin)
            cycles += 1
            clock["now"] = cycles
            if started is None and kv_v and kv_r:
                started = cycles
            if valid and ready:
                got.append([int(x) for x in payload])
                marks.setdefault("o", []).append(cycles)
        if stats is not None:
            stats["cycles"] = cycles - (started or 0) + 1
            for name in ("pe_busy", "pe_wait_kv", "pe_wait_exp", "pe_pad", "exp_busy",
                         "fin_busy"):
                stats[name] = ctx.get(getattr(dut, name))
            # handshake cycles of each stream (qcmd, q, cmd, kv, o: the output words)
            stats["handshakes"] = {n: list(v) for n, v in marks.items() if n != "first_kv"}

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in (drive_cmd, drive_qcmd, drive_q, drive_kv):
        sim.add_testbench(tb, background=True)
    sim.add_testbench(consume)
    sim.run()
    if len(got) < total_out:
        raise AssertionError(f"core hung: {len(got)}/{total_out} output words after "
                             f"{max_cycles} cycles; state {state}")
    out = np.zeros((nq, words_per_row * qw), dtype=np.int64)
    for idx, word in enumerate(got):
        row, wi = divmod(idx, words_per_row)
        out[row, wi * qw:(wi + 1) * qw] = word
    # rows come out tile by tile; tiles are in query_tiles order, which is row order
    return out[:, :dv]
