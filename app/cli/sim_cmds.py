"""``attenio schedule``, ``dataflows``, ``compare`` and ``explore``: the schedule generator's
commands (no RTL)."""

from __future__ import annotations

import sys
import time
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
    preset_option_for,
    sinks_option,
    softcap_option,
    v_scales_option,
    window_option,
)
from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.model.variants import check_sinks


@main.command("schedule")
@preset_option_for("asplos26")
@config_option
@_workload_options
@window_option
@softcap_option
@sinks_option
@alibi_option
@click.option("--dataflow", type=click.Choice(["attenio", "fa2", "fa2-uncapped", "flat",
                                               "standard"]), default="attenio",
              show_default=True)
@click.option("--trace", "trace_path", default=None, metavar="FILE",
              help="Write a Perfetto/Chrome trace JSON (open in ui.perfetto.dev).")
@click.option("--plot", "plot_path", default=None, metavar="FILE",
              help="Write a PNG Gantt and utilization plot.")
@click.option("--program", "program_path", default=None, metavar="FILE",
              help="Write the binary program the controller fetches.")
@click.option("--q-scales", "q_scales", type=click.Choice(["tensor", "row"]), default="tensor",
              show_default=True, help="Q with one scale, or one per row (each row carries its "
              "multiplier: LOAD_Q.row_scales).")
@click.option("--k-block", "k_block", type=click.IntRange(min=1), default=None,
              help="K with one scale per block of this many keys (each key carries its factor, "
                   "LOAD_KV.key_scales: a word after each K row, or in a paged cache a word of "
                   "factors before each group of rows; an 8-bit K/V cache, "
                   "configs/asplos26-kv8.toml).")
@v_scales_option
@json_option
@csv_option
@_friendly
def schedule_cmd(preset, config_file, n, d, d_v, v_in_k, nk, heads, kv_heads, batch, causal,
                 seqlens,
                 seqlens_k, decode, cache_lens, page_size, lse, block_table, window, softcap,
                 sinks, alibi, alibi_slopes, dataflow, trace_path, plot_path, program_path,
                 q_scales, k_block, v_scales, json_path, csv_path):
    """Tile a workload, emit its program and print the predicted timeline.

    Exits 1 if the schedule's DRAM bytes differ from the closed form (docs/dataflows.md).
    """
    from attenio.contract import program as prog
    from attenio.model import io_analysis as io
    from attenio.sim.plan import default_scale
    from attenio.sim.schedule import ENGINES, schedule
    from attenio.sim.trace import TRACK_NAMES, write_chrome_trace, write_plot

    hw = _load_hw(preset, config_file)
    _outputs(plots=("plot",), trace=trace_path, plot=plot_path, program=program_path,
             json=json_path, csv=csv_path)
    # (a workload this hardware cannot run is refused here, before any work)
    wl = _workload(hw, n=n, d=d, d_v=d_v, v_in_k=v_in_k, nk=nk, heads=heads, kv_heads=kv_heads,
                   batch=batch,
                   causal=causal, seqlens=seqlens, seqlens_k=seqlens_k, window=window,
                   decode=decode, cache_lens=cache_lens, page_size=page_size, lse=lse)
    table = _block_table(block_table, wl)
    check_softcap(hw, softcap)
    check_sinks(hw, sinks, wl.heads)
    slopes = alibi_of(hw, alibi, alibi_slopes, wl.heads)
    name = config_file or preset or "asplos26"
    _check_scales(hw, name, q_scales, k_block, v_scales, wl)
    for flag, on in (("--softcap", softcap is not None), ("--sinks", sinks is not None),
                     ("--alibi", slopes is not None), ("--q-scales row", q_scales == "row"),
                     ("--k-block", k_block is not None), ("--v-scales key", v_scales == "key")):
        if on and dataflow in ("flat", "standard"):
            raise ConfigError(f"dataflow={dataflow!r} is invalid with {flag}: the phase models "
                              "have no score pipeline (use attenio, fa2, fa2-uncapped)")
    if wl.windowed and dataflow in ("flat", "standard"):
        raise ConfigError(f"dataflow={dataflow!r} is invalid with --window: the phase models "
                          "have no windows (use attenio, fa2, fa2-uncapped)")
    if (trace_path or plot_path) and dataflow in ("flat", "standard"):
        raise ConfigError(f"dataflow={dataflow!r} is invalid with --trace/--plot: flat and "
                          "standard run a phase model and have no timeline (use attenio, fa2, "
                          "fa2-uncapped)")
    if program_path and dataflow in ("flat", "standard"):
        raise ConfigError(f"dataflow={dataflow!r} is invalid with --program: flat and standard "
                          "run a phase model and have no program (use attenio, fa2, fa2-uncapped)")
    if program_path and dataflow != "attenio":
        raise ConfigError(f"dataflow={dataflow!r} is invalid with --program: only attenio's "
                          "program fits this controller (fa2's K/V blocks exceed its fields)")
    t0 = time.perf_counter()
    with _Bar("scheduling") as bar:
        sch = schedule(hw, wl, dataflow, keep_spans=bool(trace_path or plot_path), progress=bar,
                       block_table=table,
                       scale=default_scale(hw, wl, softcap, sinks, slopes,
                                           q_rows=q_scales == "row",
                                           key_scales=k_block is not None,
                                           value_scales=v_scales == "key"))
    elapsed = time.perf_counter() - t0
    # a program moves rows as whole words: its closed form is that of the padded head dim (the
    # phase models of flat and standard count d itself)
    padded = sch.program is not None and hw.row_elements(d) != d
    traffic = sch.closed_form(C.replace(wl, head_dim=hw.row_elements(d)) if padded else wl)
    click.echo(f"schedule: preset={name} dataflow={dataflow} {_describe(wl)}"
               + (f" softcap={softcap:g}" if softcap else "")
               + (f" sinks={','.join(f'{x:g}' for x in sinks)}" if sinks else "")
               + (f" alibi={','.join(f'{x:g}' for x in slopes)}" if slopes else ""))
    t = sch.tiling
    click.echo(f"  tiling               {t.notes}"
               + (" (the longest sequence's; each has its own)" if sch.tilings else ""))
    if sch.program is not None:
        tiles = sum(1 for i in sch.program if i.op == prog.Op.FINALIZE)
        click.echo(f"  program              {len(sch.program):,} instructions "
                   f"({len(sch.program) * prog.INSTR_BYTES:,} bytes), {tiles:,} tiles")
    else:
        click.echo("  program              none (phase-level model; no instruction stream)")
    if sch.block_table is not None:
        click.echo(_table_line(sch))
    if k_block is not None and sch.program is not None:
        kf = traffic.reads.get("KF", 0) * hw.element_bytes
        how = (f"{hw.factor_group(wl.page_size)} a word before each group of rows in a page"
               if wl.page_size else "a word after each K row")
        click.echo(f"  K factors            one a key, {how}: {_fmt_bytes(kf)} ({kf:,} B)")
    if v_scales == "key" and sch.program is not None:
        vf = traffic.reads.get("VF", 0) * hw.element_bytes
        click.echo(f"  V factors            one a key, {hw.factor_group(wl.page_size)} a word "
                   f"before each group of V rows in a page: {_fmt_bytes(vf)} ({vf:,} B)")
    click.echo(f"  total cycles         {sch.total_cycles:,}  ({sch.time_us / 1000:,.3f} ms at "
               f"{hw.clock_mhz:g} MHz)")
    click.echo(f"  PE utilization       {sch.pe_util_time:.2%} by time, {sch.pe_util_mac:.2%} by "
               "MAC (useful MACs / (MACs x cycles))")
    click.echo("  busy cycles")
    for eng in ENGINES:
        b = sch.busy[eng]
        click.echo(f"    {TRACK_NAMES[eng]:<18} {b:>16,}  {b / sch.total_cycles:7.2%}")
    click.echo("  PE idle, by cause")
    for cause, c in sorted(sch.stalls.items(), key=lambda kv: -kv[1]):
        click.echo(f"    {cause.removeprefix('pe: '):<36} {c:>16,}  {c / sch.total_cycles:7.2%}")
    same = (sch.read_bytes, sch.write_bytes) == (traffic.read_bytes, traffic.write_bytes)
    click.echo(f"  DRAM read            {_fmt_bytes(sch.read_bytes)}  ({sch.read_bytes:,} B)")
    click.echo(f"  DRAM written         {_fmt_bytes(sch.write_bytes)}  ({sch.write_bytes:,} B)")
    if sch.requests is not None:
        rq = sch.requests
        click.echo(f"  AXI bursts           {rq['read']:,} read, {rq['write']:,} write, "
                   f"{rq['fetch']:,} program")
    click.echo(f"  closed form          {'equal' if same else 'DIFFERENT'} "
               f"({traffic.elements:,} elements; {traffic.elements / io.compulsory(wl):.2f}x "
               "the compulsory 4Nd"
               + (f"; rows of d = {d} move as {hw.row_elements(d)} elements" if padded else "")
               + ")")
    click.echo(f"  model time           {elapsed:.2f} s")
    if trace_path:
        size = write_chrome_trace(sch, trace_path)
        hint = ("; over 50 MB: a name ending in .json.gz writes it gzipped"
                if size > 50e6 and not trace_path.endswith(".gz") else "")
        click.echo(f"  wrote trace          {trace_path} ({_fmt_bytes(size)}{hint})")
    if plot_path:
        write_plot(sch, plot_path, label=config_file or preset or "asplos26")
        click.echo(f"  wrote plot           {plot_path}")
    if program_path:
        Path(program_path).write_bytes(prog.encode(sch.program))
        click.echo(f"  wrote program        {program_path}")
    report = {**sch.to_dict(), "closed_form": {
        "read_bytes": traffic.read_bytes, "write_bytes": traffic.write_bytes, "equal": same}}
    if json_path:
        _write_json(json_path, report)
    if csv_path:
        _write_csv(csv_path, _metric_rows(report))
    if not same:
        click.echo(f"error: the schedule's DRAM bytes ({sch.read_bytes:,} read, "
                   f"{sch.write_bytes:,} written) differ from the closed form "
                   f"({traffic.read_bytes:,}, {traffic.write_bytes:,})", err=True)
        sys.exit(1)


@main.command("dataflows")
@preset_option_for("asplos26")
@config_option
@click.option("--ns", default="8192,16384,32768,65536,131072", show_default=True,
              help="Comma-separated sequence lengths.")
@click.option("--ds", default="64,128", show_default=True, help="Comma-separated head dims.")
@click.option("--causal", is_flag=True)
@csv_option
@click.option("--bandwidth-sweep", is_flag=True,
              help="Also sweep DRAM bytes/cycle at the middle N to show where regimes cross.")
@json_option
@_friendly
def dataflows_cmd(preset, config_file, ns, ds, causal, csv_path, bandwidth_sweep, json_path):
    """Rerun the paper's comparison: traffic and cycles of every dataflow on the same hardware."""
    from attenio.sim.compare import PAPER, compare_dataflows, geomean
    from attenio.sim.compare import bandwidth_sweep as sweep

    hw = _load_hw(preset, config_file)
    _outputs(csv=csv_path, json=json_path)
    try:
        n_list = [int(x) for x in ns.split(",")]
        d_list = [int(x) for x in ds.split(",")]
    except ValueError:
        raise ConfigError(f"ns/ds={ns!r}/{ds!r} is invalid: comma-separated integers") from None
    rows = compare_dataflows(hw, n_list, d_list, causal=causal, progress=lambda m: click.echo(
        f"  ... {m}", err=True))
    flows = ["flat", "standard", "fa2", "fa2-uncapped"]
    for d in d_list:
        sub = [r for r in rows if r["d"] == d]
        click.echo(f"\nd = {d}: DRAM traffic relative to attenio (elements) | attenio speedup "
                   "(cycles)")
        click.echo(f"  {'N':>7} " + " ".join(f"{f:>12}" for f in flows) + " | "
                   + " ".join(f"{f:>12}" for f in flows) + " | attenio PE time/MAC")
        for n in n_list:
            by = {r["dataflow"]: r for r in sub if r["n"] == n}
            a = by["attenio"]
            tr = " ".join(f"{by[f]['elements'] / a['elements']:>11.1f}x" for f in flows)
            sp = " ".join(f"{by[f]['cycles'] / a['cycles']:>11.2f}x" for f in flows)
            click.echo(f"  {n:>7} {tr} | {sp} | {a['pe_util_time']:.1%} / {a['pe_util_mac']:.1%}")
        gt = " ".join(f"{geomean(sub, f, 'elements'):>11.1f}x" for f in flows)
        gs = " ".join(f"{geomean(sub, f, 'cycles'):>11.2f}x" for f in flows)
        click.echo(f"  {'geomean':>7} {gt} | {gs}")
        if d in PAPER:
            p = PAPER[d]
            tr = " ".join(f"{p['traffic'][f]:>11.1f}x" for f in ("flat", "standard", "fa2"))
            sp = " ".join(f"{p['speedup'][f]:>11.2f}x" for f in ("flat", "standard", "fa2"))
            click.echo(f"  {'paper':>7} {tr} {'-':>12} | {sp} {'-':>12} | "
                       f"PE {p['pe_util']:.1%} by time")
    sweep_rows = []
    if bandwidth_sweep:
        n_mid = n_list[len(n_list) // 2]
        for d in d_list:
            click.echo(f"\nbandwidth sweep at N = {n_mid}, d = {d}: cycles relative to attenio")
            click.echo(f"  {'B/cycle':>7} " + " ".join(f"{f:>12}" for f in ["attenio"] + flows))
            for bw, res in sweep(hw, n_mid, d, causal=causal):
                a = res["attenio"]
                click.echo(f"  {bw:>7} {a:>12,}" + "".join(f" {res[f] / a:>11.2f}x"
                                                            for f in flows))
                sweep_rows.append({"n": n_mid, "d": d, "bytes_per_cycle": bw,
                                   **{f"cycles_{f}": c for f, c in res.items()}})
    name = config_file or preset
    for r in rows:
        r.setdefault("preset", name)
        r.setdefault("causal", causal)
    if csv_path:
        _write_csv(csv_path, rows)
    if json_path:
        _write_json(json_path, {"hardware": hw.to_dict(), "preset": name, "causal": causal,
                                "rows": rows, "bandwidth_sweep": sweep_rows})


@main.command("compare")
@preset_option_for("asplos26")
@config_option
@click.option("--gpu", "gpu_csv", default=None, metavar="NAME|FILE[,FILE…]",
              help="GPU measurements: a bundled one (h200: attention shapes, the default; "
                   "h200-serving: the serving workloads, shared-prefix decode and decode "
                   "from an 8-bit K/V cache (decode-fp8) among them, "
                   "SDPA/FlexAttention and FlashInfer) "
                   "or files read together, CSVs of scripts/gpu/gpu_baseline.py (attention "
                   "shapes) or JSONs of scripts/gpu/gpu_serving.py and gpu_flashinfer.py (the "
                   "serving workloads; --ns, --ds, --causal, --dtype do not apply).")
@click.option("--baseline", default=None, metavar="BACKEND|WORKLOAD=BACKEND,…",
              help="The GPU kernel to compare with (default: the fastest measured for each "
                   "row): one backend for every row, or per serving workload.")
@click.option("--variants", is_flag=True,
              help="With a serving JSON: also the variant layers it measured (soft cap on and "
                   "off, ALiBi, gpt-oss's sinks with and without its window, MLA's absorbed "
                   "decode), each whole layer on the accelerator with the unit it needs.")
@click.option("--ns", default="1024,2048,4096,8192,16384,32768,65536,131072", show_default=True)
@click.option("--ds", default="64,128", show_default=True)
@click.option("--causal", type=click.Choice(["no", "yes", "both"]), default="both",
              show_default=True)
@click.option("--dtype", type=click.Choice(["bf16", "fp16"]), default="bf16", show_default=True)
@click.option("--gpu-peak-tflops", type=float, default=989.4, show_default=True,
              help="The GPU's dense peak (H200 SXM datasheet).")
@click.option("--gpu-bandwidth-tbs", type=float, default=4.8, show_default=True)
@csv_option
@click.option("--plot", "plot_path", default=None, metavar="FILE", help="Roofline PNG.")
@json_option
@_friendly
def compare_cmd(preset, config_file, gpu_csv, baseline, variants, ns, ds, causal, dtype,
                gpu_peak_tflops, gpu_bandwidth_tbs, csv_path, plot_path, json_path):
    """Accelerator cycles (modeled) against GPU baselines (measured), with labeled projections."""
    from attenio.sim import gpu as G

    hw = _load_hw(preset, config_file)
    _outputs(plots=("plot",), csv=csv_path, plot=plot_path, json=json_path)
    for name, v in (("gpu_peak_tflops", gpu_peak_tflops), ("gpu_bandwidth_tbs", gpu_bandwidth_tbs)):
        if not v > 0:
            raise ConfigError(f"{name}={v!r} is invalid: a positive number")
    files = G.resolve_gpu_files(gpu_csv)
    if files[0].endswith(".json"):
        _compare_serving(hw, files, gpu_peak_tflops, gpu_bandwidth_tbs, csv_path, json_path,
                         plot_path, config_file or preset or "asplos26", baseline, variants)
        return
    if variants:
        raise ConfigError("variants is invalid with a CSV of attention shapes: the variant "
                          "layers are in the serving JSONs (--gpu h200-serving)")
    if baseline and "=" in baseline:
        raise ConfigError(f"baseline={baseline!r} is invalid: WORKLOAD=BACKEND is for the "
                          "serving JSONs; give one backend for the attention shapes")
    data = G.load_gpu_csvs(files)
    try:
        n_list = [int(x) for x in ns.split(",")]
        d_list = [int(x) for x in ds.split(",")]
    except ValueError:
        raise ConfigError(f"ns/ds={ns!r}/{ds!r} is invalid: comma-separated integers") from None
    causals = {"no": [False], "yes": [True], "both": [False, True]}[causal]
    with _Bar("comparing") as bar:
        rows = G.compare(hw, data, n_list, d_list, causals, dtype, gpu_peak_tflops,
                         gpu_bandwidth_tbs, progress=bar, baseline=baseline)
    pv = data.provenance
    click.echo(f"GPU (measured): {pv.get('gpu', '?')}, driver {pv.get('driver', '?')}, torch "
               f"{pv.get('torch', '?')}, CUDA {pv.get('cuda', '?')}, {pv.get('date', '?')}; "
               f"dense peak {gpu_peak_tflops:g} TFLOP/s (datasheet), measured 8192^3 GEMM "
               f"{pv.get(f'gemm_8192_{dtype}_tflops', '?')} TFLOP/s")
    acc_peak = 2 * hw.macs * hw.clock_mhz / 1e6
    click.echo(f"accelerator (modeled): {config_file or preset or 'asplos26'}, {hw.macs} MACs at "
               f"{hw.clock_mhz:g} MHz = {acc_peak:.3f} TFLOP/s peak, "
               f"{hw.dram_bytes_per_cycle} B/cycle; RTL cycles: not simulated at these sizes")
    bpc = rows[0]["proj_bw_bytes_per_cycle"]
    click.echo("projections: [peak] the accelerator scaled to the GPU's peak (paper §5); "
               f"[peak+bw] scaled to its peak with the GPU's bytes per FLOP ({bpc} B/cycle "
               "before scaling)\n")
    click.echo(f"{'d':>4} {'N':>7} {'causal':>6} | {'GPU 1 head':>11} {'TFLOP/s':>8} | "
               f"{'GPU per head':>12} {'TFLOP/s':>8} {'%peak':>6} {'backend':>9} | "
               f"{'acc cycles':>14} {'%peak':>6} | {'[peak] us':>10} {'speedup':>7} | "
               f"{'[peak+bw] us':>12} {'speedup':>7}")
    for r in rows:
        click.echo(f"{r['d']:>4} {r['n']:>7} {('yes' if r['causal'] else 'no'):>6} | "
                   f"{r['gpu_one_us']:>9.1f}us {r['gpu_one_tflops']:>8.1f} | "
                   f"{r['gpu_filled_us_per_head']:>10.1f}us {r['gpu_filled_tflops']:>8.1f} "
                   f"{r['gpu_filled_pct_peak']:>5.1f}% {r['gpu_backend_filled']:>9} | "
                   f"{r['acc_cycles']:>14,} {r['acc_pct_peak']:>5.1f}% | "
                   f"{r['proj_equal_peak_us']:>10.1f} {r['proj_equal_peak_speedup']:>6.2f}x | "
                   f"{r['proj_equal_peak_bw_us']:>12.1f} {r['proj_equal_peak_bw_speedup']:>6.2f}x")
    short = [r for r in rows if r["n"] <= 8192 and not r["causal"]]
    if short:
        click.echo(f"\n[peak] speedup over the measured GPU, N = 1K-8K, non-causal: "
                   f"{min(r['proj_equal_peak_speedup'] for r in short):.2f}x to "
                   f"{max(r['proj_equal_peak_speedup'] for r in short):.2f}x "
                   "(paper: 2.4-3.4x over an H100 at N = 1K-8K)")
    if csv_path:
        _write_csv(csv_path, rows)
    if json_path:
        _write_json(json_path, {"hardware": hw.to_dict(), "gpu": pv, "dtype": dtype,
                                "gpu_peak_tflops": gpu_peak_tflops,
                                "gpu_bandwidth_tbs": gpu_bandwidth_tbs, "rows": rows})
    if plot_path:
        gemm = pv.get(f"gemm_8192_{dtype}_tflops")
        G.roofline_plot(rows, hw, plot_path, gpu_peak_tflops, gpu_bandwidth_tbs,
                        float(gemm) if gemm not in (None, "", "?") else None)
        click.echo(f"wrote {plot_path}")





@main.command("explore")
@preset_option_for("asplos26")
@config_option
@click.option("--set", "sets", multiple=True, metavar="FIELD=VALUES",
              help="A hardware field and its values: 'mac_lines=32,64', 'sram_kb=64:768:64' "
                   "(lo:hi:step). Fields: mac_lines, macs_per_line, sram_kb, tile_rows, "
                   "exp_lanes, data_bits, dram_bytes_per_cycle, clock_mhz, kv_ring_depth, "
                   "max_keys_per_step, max_head_dim.")
@click.option("--n", "n", default="4096", show_default=True, help="Sequence lengths (list).")
@click.option("--nk", default=None, help="Key lengths (list), if different from --n.")
@click.option("--d", "d", default="64", show_default=True, help="Head dims (list).")
@click.option("--heads", default="1", show_default=True, help="Query heads (list).")
@click.option("--kv-heads", default=None, help="K/V heads (list); default = heads.")
@click.option("--causal", default="false", show_default=True, help="false, true or both.")
@click.option("--vs-fa2", is_flag=True, help="Also run FA-2 on each point's hardware.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Local processes (default: CPUs).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Run on Dask: a scheduler address (tcp://host:8786), or local[:N] for a "
                   "local Dask cluster of N workers.")
@click.option("--results", default=None, metavar="FILE.jsonl",
              help="Points as they finish (a rerun resumes from it).")
@csv_option
@click.option("--plot", "plot_path", default=None, metavar="FILE",
              help="Cycles against area, coloured by energy, Pareto front marked.")
@json_option
@_friendly
def explore(preset, config_file, sets, n, nk, d, heads, kv_heads, causal, vs_fa2, workers,
            scheduler, results, csv_path, plot_path, json_path):
    """Sweep hardware fields and workloads through the schedule generator with area and
    energy estimates; print the Pareto front (time x area x energy) of each workload.

    Area and energy are estimates (sim/cost.py, docs/explore.md): ASIC figures calibrated to the
    paper's Table 3, FPGA resources fitted on synthesis reports.
    """
    from attenio.sim import explore as E

    _outputs(plots=("plot",), csv=csv_path, plot=plot_path, json=json_path, results=results)
    base = _load_hw(None, config_file).to_dict() if config_file else (preset or "asplos26")
    hw_values = E.parse_sets(sets)
    E.check_values(base, hw_values)
    wl_values = {"n": E.parse_values("n", n), "d": E.parse_values("d", d),
                 "heads": E.parse_values("heads", heads),
                 "causal": E.parse_values("causal", causal)}
    if nk:
        wl_values["nk"] = E.parse_values("nk", nk)
    if kv_heads:
        wl_values["kv_heads"] = E.parse_values("kv_heads", kv_heads)
    points = E.grid(base, hw_values, wl_values)
    import os

    where = "Dask " + scheduler if scheduler else f"{workers or os.cpu_count()} local processes"
    click.echo(f"explore: base={config_file or preset} {len(points):,} points on {where}"
               + (f", results in {results}" if results else ""))
    t0 = time.perf_counter()
    with _Bar("points") as bar:
        rows = E.run_sweep(points, workers=workers, results=results, scheduler=scheduler,
                           vs_fa2=vs_fa2, progress=lambda k, total: bar(k / total))
    dt = time.perf_counter() - t0
    ok = [r for r in rows if r.get("feasible")]
    bad_rows = [r for r in rows if not r.get("feasible")]
    front = E.pareto_front(rows)
    click.echo(f"  points               {len(rows):,} ({len(ok):,} feasible, {len(bad_rows):,} "
               f"infeasible) in {dt:.1f} s ({len(rows) / dt if dt else 0:,.0f} points/s)")
    for r in bad_rows[:3]:
        click.echo(f"  infeasible           {E.point_label(r)}: {r['reason']}")
    click.echo(f"  Pareto front         {len(front)} points (time x area x energy, per "
               "workload; area and energy are estimates)")
    shown = sorted(front, key=lambda r: (r["key"].split('"wl"')[1], r["time_us"]))[:20]
    w = max([len("point")] + [len(E.point_label(r)) for r in shown])   # labels are never cut
    click.echo(f"  {'point':<{w}} {'time us':>11} {'mm2':>6} {'energy uJ':>10} {'PE/MAC':>7}"
               + (f" {'vs FA-2':>8}" if vs_fa2 else ""))
    for r in shown:
        click.echo(f"  {E.point_label(r):<{w}} {r['time_us']:>11,.1f} {r['area_mm2']:>6.2f} "
                   f"{r['energy_uj']:>10,.0f} {r['pe_util_mac']:>6.1%}"
                   + (f" {r.get('energy_eff_vs_fa2', float('nan')):>7.2f}x" if vs_fa2 else ""))
    if csv_path:
        keys = sorted({k for r in rows for k in r})
        _write_csv(csv_path, [{k: r.get(k, "") for k in keys} for r in rows])
    if plot_path:
        E.plot_front(ok, front, plot_path)
        click.echo(f"wrote {plot_path}")
    if json_path:
        _write_json(json_path, {"base": base, "hw": hw_values, "wl": wl_values,
                                "seconds": dt, "points": rows,
                                "pareto_front": [r["key"] for r in front]})


def _serving_baselines(baseline: str | None) -> dict[str, str] | None:
    """``--baseline``: one backend for every serving workload, or ``WORKLOAD=BACKEND,…``."""
    from attenio.sim import serving as SV

    if not baseline:
        return None
    if "=" not in baseline:
        return {w: baseline for w in SV.WORKLOADS}
    out = {}
    known = SV.WORKLOADS + SV.FP8 + SV.SHARED + SV.VARIANTS
    for part in baseline.split(","):
        w, _, b = part.partition("=")
        if w not in known or not b:
            raise ConfigError(f"baseline={part!r} is invalid: WORKLOAD=BACKEND with a workload "
                              f"of {', '.join(known)}")
        out[w] = b
    return out


def _compare_serving(hw, paths, gpu_peak_tflops, gpu_bandwidth_tbs, csv_path, json_path,
                     plot_path, name, baseline=None, variants=False):
    """``attenio compare --gpu FILE.json[,FILE.json…]``: the serving workloads
    (sim/serving.py), each against the fastest kernel measured for it."""
    from attenio.sim import serving as SV

    if plot_path:
        raise ConfigError("plot is invalid with a serving JSON: the roofline plot is for the "
                          "attention shapes of a CSV")
    data = SV.load_serving_jsons(paths)
    with _Bar("modeling the serving workloads") as bar:
        rows = SV.compare_serving(hw, data, gpu_peak_tflops, gpu_bandwidth_tbs, progress=bar,
                                  baselines=_serving_baselines(baseline), variants=variants)
    pv = data["provenance"]
    for src, p in data.get("sources", {"": pv}).items():
        extra = f", FlashInfer {p['flashinfer']}" if p.get("flashinfer") else ""
        ceil = (f"; measured HBM read {p['hbm_read_tbs']} TB/s, GEMM "
                f"{p.get('gemm_8192_bf16_tflops', '?')} TFLOP/s" if p.get("hbm_read_tbs")
                else "")
        click.echo(f"GPU (measured{', ' + src if src else ''}): {p.get('gpu', '?')}, torch "
                   f"{p.get('torch', '?')}, CUDA {p.get('cuda', '?')}{extra}, "
                   f"{p.get('date', '?')}{ceil}")
    click.echo(f"GPU: {data['dtype']}, d={data['d']}; dense peak {gpu_peak_tflops:g} TFLOP/s "
               f"and {gpu_bandwidth_tbs:g} TB/s (datasheet)")
    acc_peak = 2 * hw.macs * hw.clock_mhz / 1e6
    click.echo(f"accelerator (modeled): {name}, {acc_peak:.3f} TFLOP/s peak, "
               f"{hw.dram_bytes_per_cycle} B/cycle; projections as for the CSV (--help)\n")
    click.echo(f"{'workload':>12} {'compared':>9} | {'GPU backend':>28} {'ms':>8} {'%peak':>6} "
               f"{'%read':>6} | {'acc cycles':>13} {'%peak':>6} {'%DRAM':>6} | "
               f"{'[peak] ms':>9} {'speedup':>7} | {'[peak+bw] ms':>12} {'speedup':>7}")
    for r in rows:
        rd = r["gpu_pct_read_ceiling"]
        click.echo(f"{r['workload']:>12} {r['compared']:>9} | {r['gpu_backend']:>28} "
                   f"{r['gpu_ms']:>8.3f} {r['gpu_pct_peak']:>5.1f}% "
                   f"{(f'{rd:5.1f}%' if rd is not None else '    - '):>6} | "
                   f"{r['acc_cycles']:>13,} {r['acc_pct_peak']:>5.1f}% "
                   f"{r['acc_pct_dram_busy']:>5.1f}% | {r['proj_equal_peak_ms']:>9.3f} "
                   f"{r['proj_equal_peak_speedup']:>6.2f}x | {r['proj_equal_peak_bw_ms']:>12.3f} "
                   f"{r['proj_equal_peak_bw_speedup']:>6.2f}x")
    click.echo("\nGPU backend: the fastest measured for the workload (or --baseline); every "
               "kernel measured is in --json's gpu_candidates. %read: the K/V bytes the "
               "workload must touch over the GPU's time, against its measured HBM read rate. "
               "%DRAM: the accelerator's DRAM bandwidth busy.")
    dec = next(r for r in rows if r["workload"] == "decode")
    others = sorted(dec["gpu_candidates"].items(), key=lambda kv: kv[1])[1:]
    if others:
        click.echo("decode, the other paged kernels measured (slower baselines): " + ", ".join(
            f"{b} {ms:.3f} ms" for b, ms in others) + ". It is memory-bound: [peak+bw] is the "
            "projection that applies.")
    f8 = next((r for r in rows if r["workload"] in SV.FP8), None)
    if f8:
        click.echo(f"decode-fp8: the decode trace from an 8-bit K/V cache against the GPU's "
                   f"FP8-K/V kernels; the accelerator as {name} with {f8['acc_data_bits']}-bit "
                   "elements, Q per row, each key's K and V scales in its pages (configs/"
                   "asplos26-kv8.toml; docs/numerics.md, \"8-bit K/V caches\").")
    shared = [r for r in rows if r["workload"] in SV.SHARED]
    if shared:
        click.echo("shared-prefix decode (the batch): the accelerator reads each shared page "
                   "once a K/V head where that is faster by the model (sequences so read, at "
                   "its bandwidth / the projected one: " + ", ".join(
                       f"{r['workload']} {r['acc_shared_seqs']}/{r['acc_bw_shared_seqs']}"
                       for r in shared) + "); every GPU kernel of the trace in "
                   "gpu_candidates (" + "; ".join(
                       f"{r['workload']}: " + ", ".join(f"{b} {ms:.3f} ms" for b, ms in
                                                        r["gpu_candidates"].items())
                       for r in shared) + ").")
    units = {r["workload"]: ", ".join(
        [f"+{u.removesuffix('_unit')}" for u in r["acc_units"]]
        + ([f"head dims to {r['acc_max_head_dim']}"] if r["acc_max_head_dim"]
           != hw.max_head_dim else [])) for r in rows if r["compared"] == "the layer"}
    if units:
        click.echo("variant layers, whole (all heads) on both sides; the accelerator as "
                   f"{name} with: " + "; ".join(f"{w} {u or 'nothing added'}"
                                                for w, u in units.items()) + ".")
    if csv_path:
        _write_csv(csv_path, rows)
    if json_path:
        _write_json(json_path, {"hardware": hw.to_dict(), "gpu": pv,
                                "gpu_peak_tflops": gpu_peak_tflops,
                                "gpu_bandwidth_tbs": gpu_bandwidth_tbs, "rows": rows})
