"""``attenio golden`` (the datapath contract) and ``attenio accuracy`` (end to end against
float64 and bf16 attention)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from attenio.app.cli.app import (
    _Bar,
    _block_table,
    _describe,
    _friendly,
    _load_hw,
    _metric_rows,
    _outputs,
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
    sinks_option,
    softcap_option,
    softmax_scale_option,
    window_option,
)
from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.model.variants import check_sinks


@main.command("golden")
@preset_option
@config_option
@_workload_options
@click.option("--dist", type=click.Choice(["gaussian", "uniform", "llm-outliers", "peaky"]),
              default="gaussian", show_default=True,
              help="Built-in inputs, the accuracy command's classes (docs/numerics.md).")
@click.option("--logit-sigma", "sigma", type=click.FloatRange(min=0, min_open=True),
              default=None, help="Scale the built-in Q and K so the logits have this standard "
                                 "deviation (default: the class's own).")
@click.option("--inputs", "npz", default=None, metavar="FILE.npz",
              help="Your own float Q, K, V (an .npz with arrays q, k, v); the workload is "
                   "their shape.")
@click.option("--scheme", type=click.Choice(["tensor", "smooth", "rotate"]), default="tensor",
              show_default=True, help="Host quantization scheme (docs/numerics.md).")
@click.option("--q-scales", "q_scales", type=click.Choice(["tensor", "row"]), default="tensor",
              show_default=True, help="Q with one scale, or one per row (LOAD_Q.row_scales).")
@click.option("--k-block", "k_block", type=click.IntRange(min=1), default=None,
              help="K with one scale per block of this many keys (LOAD_KV.key_scales).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--stepwise", is_flag=True, help="Use the block-by-block model (slower, same bits).")
@window_option
@softmax_scale_option
@softcap_option
@sinks_option
@alibi_option
@json_option
@csv_option
@_friendly
def golden(preset, config_file, n, d, d_v, v_in_k, nk, heads, kv_heads, batch, causal, seqlens,
           seqlens_k,
           decode, cache_lens, page_size, lse, block_table, dist, sigma, npz, scheme, q_scales,
           k_block, seed, stepwise, window, softmax_scale, softcap, sinks, alibi, alibi_slopes,
           json_path, csv_path):
    """Run the bit-exact integer model against float64 attention of the same quantized inputs
    and print the errors (N = 1024 unless --n or --seqlens says otherwise).

    Exits 1 if the error exceeds the contract of docs/numerics.md (max 1e-3 and mean 1e-4 of
    V's value range).
    """
    hw = _load_hw(preset, config_file)
    _outputs(json=json_path, csv=csv_path)
    check_softcap(hw, softcap)
    floats = None
    if npz is not None:
        from attenio.model.accuracy import load_qkv

        floats, dist = load_qkv(npz)
        q0, k0 = floats[0], floats[1]
        n, nk, d, d_v = q0.shape[2], k0.shape[2], q0.shape[3], floats[2].shape[3]
        heads, kv_heads, batch = q0.shape[1], k0.shape[1], q0.shape[0]
    if n is None and seqlens is None and not decode:
        n = 1024
    wl = _workload(hw, n=n, d=d, d_v=d_v, v_in_k=v_in_k, nk=nk, heads=heads, kv_heads=kv_heads,
                   batch=batch,
                   causal=causal, seqlens=seqlens, seqlens_k=seqlens_k, window=window,
                   decode=decode, cache_lens=cache_lens, page_size=page_size, lse=lse)
    table = _block_table(block_table, wl)
    check_sinks(hw, sinks, wl.heads)
    slopes = alibi_of(hw, alibi, alibi_slopes, wl.heads)
    if table is not None and npz is not None:
        raise ConfigError(f"block_table={block_table!r} is invalid with --inputs: your K and "
                          "V are the sequences' own keys (leave --block-table out)")
    name = config_file or preset or "fpga"
    host = scheme + ("+rows" if q_scales == "row" else "") + (f"+kblk{k_block}" if k_block
                                                               else "")
    click.echo(f"golden check: preset={name} {_describe(wl)} data={dist} scheme={host} "
               f"seed={seed}" + (f" softmax-scale={softmax_scale:g}" if softmax_scale else "")
               + (f" softcap={softcap:g}" if softcap else "")
               + (f" sinks={','.join(f'{x:g}' for x in sinks)}" if sinks else "")
               + (f" alibi={','.join(f'{x:g}' for x in slopes)}" if slopes else ""))
    from attenio.model.golden import LSE_REL_BOUND, MAX_REL_BOUND, MEAN_REL_BOUND, golden_check

    with _Bar("integer model") as bar:
        m = golden_check(hw, wl, dist, seed, stepwise, progress=bar, scheme=scheme,
                         q_rows=q_scales == "row", k_block=k_block, floats=floats,
                         sigma=sigma, table=table, softmax_scale=softmax_scale,
                         softcap=softcap, sinks=sinks, alibi_slopes=slopes)
    sp = m["scale"]
    ok = m["ok"]
    if sp is not None:
        click.echo(f"  softmax multiplier   c_m={sp.c_m} c_sh={sp.c_sh}"
                   + (f" (x = logit/c), cap T={sp.cap}" if sp.cap is not None else ""))
    else:
        click.echo("  softmax multiplier   one per " + ("Q row" if q_scales == "row" else "")
                   + (" and " if q_scales == "row" and k_block else "")
                   + ("K row" if k_block else ""))
    click.echo(f"  logit σ              {m['logit_sigma']:.4g}")
    click.echo(f"  V value range        {m['v_range']:.6g}")
    click.echo(f"  max abs error        {m['max_abs']:.3e}  ({m['max_rel']:.2e} of range, "
               f"bound {MAX_REL_BOUND:.0e})")
    click.echo(f"  mean abs error       {m['mean_abs']:.3e}  ({m['mean_rel']:.2e} of range, "
               f"bound {MEAN_REL_BOUND:.0e})")
    if "lse_max_rel" in m:
        click.echo(f"  log-sum-exp (lse)    max abs error {m['lse_max_abs']:.3e} "
                   f"({m['lse_max_rel']:.2e} of 1 + |lse|, bound {LSE_REL_BOUND:.0e}); rows "
                   f"that see no key {'agree' if m['lse_rows_agree'] else 'DIFFER'}")
    click.echo(f"  time                 integer model {m['t_int']:.2f} s, "
               f"float64 reference {m['t_ref']:.2f} s")
    click.echo(f"  result               {'PASS' if ok else 'FAIL'}")
    report = {"hardware": hw.to_dict(), "workload": wl.to_dict(), "dist": dist, "seed": seed,
              "scheme": scheme, "q_scales": q_scales, "k_block": k_block,
              "softmax_scale": softmax_scale, "softcap": softcap, "sinks": sinks,
              "alibi_slopes": slopes,
              "logit_sigma_target": sigma, **{k: v for k, v in m.items() if k != "scale"},
              "c_m": sp.c_m if sp else None, "c_sh": sp.c_sh if sp else None,
              **(table.to_dict() if table is not None else {})}
    if json_path:
        _write_json(json_path, report)
    if csv_path:
        _write_csv(csv_path, _metric_rows(report))
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
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--seeds", type=click.IntRange(min=1, max=100), default=1, show_default=True,
              help="Built-in inputs drawn with this many seeds (--seed, --seed + 1, …); "
                   "each row then shows the median and the worst over them.")
@json_option
@csv_option
@_friendly
def accuracy(presets, configs, dists, npz, q_path, k_path, v_path, schemes, q_scales, k_scales,
             k_block, n, d, nk, heads, kv_heads, causal, seed, seeds, json_path, csv_path):
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
    _outputs(json=json_path, csv=csv_path)
    schemes = schemes or A.SCHEMES
    if k_block < 1:
        raise ConfigError(f"k_block={k_block} is invalid: a positive number of keys")
    own = npz is not None or any(x is not None for x in (q_path, k_path, v_path))
    if own and dists:
        raise ConfigError("dist is invalid with your own inputs: give --dist or --inputs/--q/"
                          "--k/--v, not both")
    if own and seeds > 1:
        raise ConfigError(f"seeds={seeds} is invalid with your own inputs: seeds draw the "
                          "built-in ones")
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
            for sd in range(seed, seed + seeds):
                cases.append((dist, wl, (dist, sd)))
    for hw in hws.values():      # refuse a workload a preset cannot run, before any work
        hw.check_workload(wl)
    click.echo(f"accuracy: N={wl.seq_q}x{wl.seq_k} d={wl.head_dim} heads={wl.heads}/"
               f"{wl.kv_heads} batch={wl.batch} causal={wl.causal} "
               + (f"seed={seed}" if seeds == 1 else f"seeds={seed}..{seed + seeds - 1} "
                  "(median and worst)") + "; error against float64 attention of the float inputs")
    results = []
    with _Bar("integer model") as bar:
        for i, (label, wl_c, inputs) in enumerate(cases):
            q, k, v = A.make_inputs(wl_c, *inputs) if isinstance(inputs[0], str) else inputs
            sd = inputs[1] if isinstance(inputs[0], str) else None
            rows = A.compare(hws, wl_c, q, k, v, schemes,
                             progress=lambda f, i=i: bar((i + f) / len(cases)),
                             q_scales=q_scales or A.Q_SCALES,
                             k_scales=k_scales or A.K_SCALES, k_block=k_block)
            ref_bf16 = next(r["rel_frobenius"] for r in rows if r["name"] == "bf16")
            for r in rows:
                r["inputs"] = label
                r["seed"] = sd
                r["over_bf16"] = r["rel_frobenius"] / ref_bf16 if ref_bf16 else float("inf")
            results += rows
    _accuracy_table(results, seeds)
    if json_path:
        _write_json(json_path, {"workload": wl.to_dict(), "seed": seed, "seeds": seeds,
                                "hardware": {k_: h.to_dict() for k_, h in hws.items()},
                                "rows": results})
    if csv_path:        # one row per (inputs, seed, datapath, scheme), as the JSON's rows
        _write_csv(csv_path, results)


def _accuracy_table(results: list[dict], seeds: int) -> None:
    """The accuracy rows: one per (inputs, datapath, scheme), with several seeds the median and
    the worst of the max abs error, the relative Frobenius error and its ratio to bf16's."""
    import numpy as np

    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["inputs"], r["kind"], r["name"], r["bits"], r["scheme"]),
                          []).append(r)
    if seeds == 1:
        click.echo(f"  {'inputs':<16} {'datapath':<20} {'scheme':<17} {'max abs':>9} "
                   f"{'rel Frob':>9} {'/ bf16':>7}")
    else:
        click.echo(f"  {'inputs':<16} {'datapath':<20} {'scheme':<17} {'max abs':>9} "
                   f"{'rel Frob':>9} {'/ bf16 median':>14} {'worst':>7}")
    for (label, kind, name, bits, scheme), rows in groups.items():
        what = f"int{bits} ({name})" if kind == "int" else name
        head = f"  {label[:16]:<16} {what:<20} {scheme or '-':<17} "
        ratio = [r["over_bf16"] for r in rows]
        if seeds == 1:
            r = rows[0]
            click.echo(head + f"{r['max_abs']:>9.2e} {r['rel_frobenius']:>9.2e} "
                       f"{r['over_bf16']:>6.2f}x")
        else:
            click.echo(head + f"{max(r['max_abs'] for r in rows):>9.2e} "
                       f"{float(np.median([r['rel_frobenius'] for r in rows])):>9.2e} "
                       f"{float(np.median(ratio)):>13.2f}x {max(ratio):>6.2f}x")
