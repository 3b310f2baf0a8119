"""The ``attenio`` command line: configs, golden-model checks (more subcommands as layers land)."""

from __future__ import annotations

import functools
import sys
import time

import click
import numpy as np

from attenio import config as C
from attenio.errors import ConfigError

# Accuracy contract of the integer model against the float64 reference (docs/numerics.md).
MAX_REL_BOUND = 1e-3
MEAN_REL_BOUND = 1e-4


def _friendly(fn):
    """Turn a user-caused error into one line on stderr and exit status 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConfigError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)

    return wrapper


def _load_hw(preset: str | None, config_file: str | None) -> C.HardwareConfig:
    if config_file:
        hw, _ = C.load_toml(config_file)
        if hw is None:
            raise ConfigError(f"config file={config_file!r} is invalid: it has no [hardware] table")
        return hw
    return C.preset(preset or "fpga")


preset_option = click.option(
    "--preset", default=None, metavar="NAME",
    help=f"Hardware preset: {', '.join(C.PRESETS)} (default fpga).")
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
    C.save_toml(output, _load_hw(preset, config_file))
    click.echo(f"wrote {output}")


def make_inputs(wl: C.Workload, dist: str, seed: int):
    """Random float Q, K, V for a workload (Gaussian or uniform in [-1, 1])."""
    rng = np.random.default_rng(seed)
    shapes = [(wl.batch, wl.heads, wl.seq_q, wl.head_dim)] + \
        [(wl.batch, wl.kv_heads, wl.seq_k, wl.head_dim)] * 2
    if dist == "gaussian":
        return [rng.standard_normal(s) for s in shapes]
    return [rng.uniform(-1.0, 1.0, s) for s in shapes]


def golden_check(hw: C.HardwareConfig, wl: C.Workload, dist: str = "gaussian", seed: int = 0,
                 stepwise: bool = False) -> dict:
    """Quantize random inputs, run the integer model and the float64 reference, compare."""
    from attenio.model import numerics as nm
    from attenio.model import reference as ref

    hw.check_workload(wl)
    q, k, v = make_inputs(wl, dist, seed)
    qi, sq = nm.quantize(q, hw.data_bits)
    ki, sk = nm.quantize(k, hw.data_bits)
    vi, sv = nm.quantize(v, hw.data_bits)
    t0 = time.perf_counter()
    out = nm.attention_int(hw, wl, qi, ki, vi, sq, sk, stepwise=stepwise)
    t_int = time.perf_counter() - t0
    t0 = time.perf_counter()
    exact = ref.attention(qi * sq, ki * sk, vi * sv, causal=wl.causal)
    t_ref = time.perf_counter() - t0
    m = ref.error_metrics(nm.dequantize_output(hw, out, sv), exact, vi * sv)
    m.update(t_int=t_int, t_ref=t_ref, scale=nm.softmax_scale(hw, sq, sk, wl.head_dim))
    return m


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
@_friendly
def golden(preset, config_file, n, d, nk, heads, kv_heads, batch, causal, dist, seed, stepwise):
    """Run the bit-exact integer model against the float64 reference and print the errors.

    Exits 1 if the error exceeds the contract of docs/numerics.md (max 1e-3 and mean 1e-4 of
    V's value range).
    """
    hw = _load_hw(preset, config_file)
    wl = C.Workload(seq_q=n, seq_k=nk or n, head_dim=d, heads=heads,
                    kv_heads=kv_heads or heads, batch=batch, causal=causal,
                    element_bytes=hw.element_bytes)
    name = config_file or preset or "fpga"
    click.echo(f"golden check: preset={name} N={wl.seq_q}x{wl.seq_k} d={d} heads={heads}/"
               f"{wl.kv_heads} batch={batch} causal={causal} data={dist} seed={seed}")
    m = golden_check(hw, wl, dist, seed, stepwise)
    sp = m["scale"]
    ok = m["max_rel"] <= MAX_REL_BOUND and m["mean_rel"] <= MEAN_REL_BOUND
    click.echo(f"  softmax multiplier   c_m={sp.c_m} c_sh={sp.c_sh}")
    click.echo(f"  V value range        {m['v_range']:.6g}")
    click.echo(f"  max abs error        {m['max_abs']:.3e}  ({m['max_rel']:.2e} of range, "
               f"bound {MAX_REL_BOUND:.0e})")
    click.echo(f"  mean abs error       {m['mean_abs']:.3e}  ({m['mean_rel']:.2e} of range, "
               f"bound {MEAN_REL_BOUND:.0e})")
    click.echo(f"  time                 integer model {m['t_int']:.2f} s, "
               f"float64 reference {m['t_ref']:.2f} s")
    click.echo(f"  result               {'PASS' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":  # pragma: no cover
    main()
