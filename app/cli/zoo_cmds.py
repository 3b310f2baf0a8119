"""``attenio model``: the model zoo (model/zoo.toml): list its models, show one's attention
layers with their sources, and run them on a preset under a prefill or decode batch."""

from __future__ import annotations

import time

import click

from attenio.app.cli.app import (
    _Bar,
    _friendly,
    _load_hw,
    _parse_lengths,
    _shape,
    _write_csv,
    _write_json,
    config_option,
    csv_option,
    json_option,
    main,
)
from attenio.base.errors import ConfigError


@main.group("model")
def model_group():
    """The attention layers of current open models (each value cited to its published config)
    and what they cost on the accelerator: list, show NAME, run NAME."""


@model_group.command("list")
@json_option
@_friendly
def model_list(json_path):
    """The zoo's models: name, title, layers per forward pass and their attention."""
    from attenio.model.zoo import models

    zoo = models()
    for key, m in zoo.items():
        kinds = ", ".join(f"{lt.count}× {lt.name}" for lt in m.layers)
        click.echo(f"{key:<15} {m.title:<20} {m.layer_count:>3} layers  ({kinds})")
    if json_path:
        _write_json(json_path, {"models": [_model_dict(m) for m in zoo.values()]})


def _model_dict(m) -> dict:
    from dataclasses import asdict

    return {"name": m.key, "title": m.title, "source": m.source,
            "layers": [asdict(lt) for lt in m.layers]}


@model_group.command("show")
@click.argument("name")
@json_option
@_friendly
def model_show(name, json_path):
    """One model's attention layers, each type with its count, shape and variant, and the
    config they are taken from."""
    from attenio.model.zoo import get, units_needed

    m = get(name)
    click.echo(f"{m.title} ({m.key}): {m.layer_count} attention layers a forward pass")
    click.echo(f"  source   {m.source}")
    for lt in m.layers:
        click.echo(f"  {lt.count:>3}× {lt.name:<12} {lt.describe()}")
    units = units_needed(m)
    click.echo("  needs    " + (" ".join(f"+{u}" for u in units) + " on the preset"
                                if units else "a plain preset"))
    if json_path:
        _write_json(json_path, _model_dict(m))


@model_group.command("run")
@click.argument("name")
@click.option("--preset", default="asplos26", show_default=True, metavar="NAME",
              help="Hardware preset; the units the model's layers need (+softcap, +sinks) "
                   "are added to it.")
@config_option
@click.option("--prefill", "n", type=click.IntRange(min=1), default=None, metavar="N",
              help="One prompt of N tokens (with --batch, that many).")
@click.option("--batch", type=click.IntRange(min=1), default=None, help="Prompts of --prefill N.")
@click.option("--seqlens", callback=_parse_lengths, default=None, metavar="L,L,…|@FILE",
              help="A varlen prefill batch: one prompt length each.")
@click.option("--decode", is_flag=True, help="One new token a sequence against --cache-lens.")
@click.option("--cache-lens", "cache_lens", callback=_parse_lengths, default=None,
              metavar="L,L,…|@FILE", help="Each decoding sequence's cached keys.")
@click.option("--page-size", "page_size", type=int, default=0, show_default=True,
              help="Keys a page of a paged K/V cache (0: contiguous).")
@click.option("--gpu", "gpu", default=None, metavar="NAME|FILE|none",
              help="GPU measurements to compare with: h100-zoo (the default for a prefill: "
                   "FlashInfer on the zoo's layers), h200-serving (the serving traces' decode "
                   "batches; it schedules the batch twice more, so a decode run only names "
                   "it), a JSON of scripts/gpu/gpu_zoo.py or gpu_flashinfer.py, or none.")
@json_option
@csv_option
@_friendly
def model_run(name, preset, config_file, n, batch, seqlens, decode, cache_lens, page_size,
              gpu, json_path, csv_path):
    """Schedule each attention layer type of model NAME on the preset under a prefill
    (--prefill N, --seqlens) or decode (--decode --cache-lens) batch: its count, workload,
    cycles, PE utilization by MAC, DRAM bytes and time at the preset's clock, and the model's
    attention time per forward pass (the sum over its layers). A layer type the RTL cannot run
    yet is listed with the reason. Where the GPU file measured a kernel on the same layer and
    batch (one prompt of a measured length), the fastest one's time is shown beside the
    accelerator projected to the GPU's peak, and to its peak and bandwidth (as `attenio
    compare`)."""
    from attenio.model.zoo import get, units_needed
    from attenio.sim.zoo import compare_gpu, decode_matches, gpu_data, run_model

    m = get(name)
    if decode and cache_lens is None:
        raise ConfigError("decode is invalid without --cache-lens: each sequence's cached keys")
    if cache_lens is not None and not decode:
        raise ConfigError("cache_lens is invalid without --decode (a prefill takes --prefill "
                          "N or --seqlens)")
    if decode and (n or seqlens):
        raise ConfigError("decode is invalid with --prefill or --seqlens: one batch, prefill "
                          "or decode")
    if not decode and n is None and seqlens is None:
        raise ConfigError("workload is invalid: give --prefill N, --seqlens L,… or "
                          "--decode --cache-lens L,…")
    if config_file is None:
        have = preset.split("+")[1:]
        preset = "+".join([preset] + [u for u in units_needed(m) if u not in have])
    hw = _load_hw(preset, config_file)
    phase = "decode" if decode else "prefill"
    opts = ({"decode": True, "cache_lens": cache_lens} if decode
            else {"n": n, "batch": batch, "seqlens": seqlens})
    t0 = time.perf_counter()
    data = None if gpu == "none" else gpu_data(gpu, phase)
    hint = data is not None and gpu is None and phase == "decode"    # named, not compared
    with _Bar(f"scheduling {m.key}") as bar:
        runs = run_model(hw, m, phase, progress=bar, page_size=page_size, **opts)
        versus = compare_gpu(hw, m, runs, data) if data and not hint else {}
    elapsed = time.perf_counter() - t0
    name_hw = config_file or preset
    shape = next((r.workload for r in runs if r.workload is not None), None)
    click.echo(f"model run: {m.title} ({m.key}) {phase} on preset={name_hw} at "
               f"{hw.clock_mhz:g} MHz" + (f": {_shape(shape)}" if shape else ""))
    click.echo(f"  {'layer':<12} {'count':>5} {'cycles a layer':>16} {'PE/MAC':>7} "
               f"{'DRAM read':>10} {'written':>9} {'time a layer':>13} {'all layers':>12}")
    total_us, refused = 0.0, []
    for r in runs:
        if r.refused:
            refused.append(r)
            click.echo(f"  {r.layer.name:<12} {r.layer.count:>5} not run: {r.refused}")
            continue
        total_us += r.time_us * r.layer.count
        click.echo(f"  {r.layer.name:<12} {r.layer.count:>5} {r.cycles:>16,} "
                   f"{r.pe_util_mac:>7.2%} {_mb(r.read_bytes):>10} {_mb(r.write_bytes):>9} "
                   f"{_time(r.time_us):>13} {_time(r.time_us * r.layer.count):>12}")
    if len(refused) == len(runs):
        click.echo(f"  attention per forward pass: none (no layer type of it runs yet)  "
                   f"[{elapsed:.1f} s]")
    else:
        click.echo(f"  attention per forward pass: {_time(total_us)}"
                   + (f" (without {', '.join(r.layer.name for r in refused)}: not run)"
                      if refused else "") + f"  [scheduled in {elapsed:.1f} s]")
    if hint:
        measured = decode_matches(hw, runs, data)
        if measured:
            click.echo(f"  GPU: {data['provenance'].get('gpu', 'the GPU')} ran this batch "
                       f"({', '.join(measured)}): --gpu h200-serving compares it")
    elif data:
        _echo_gpu(data, versus, runs)
    layers = [{**r.to_dict(), **({"gpu": versus[r.layer.name]} if r.layer.name in versus
                                 else {})} for r in runs]
    report = {"model": m.key, "title": m.title, "source": m.source, "phase": phase,
              "hardware": hw.to_dict(), "layers": layers,
              "attention_us_per_forward": total_us,
              "complete": not refused}
    if json_path:
        _write_json(json_path, report)
    if csv_path:
        _write_csv(csv_path, [{**{k: v for k, v in r.to_dict().items() if k != "workload"},
                               **_gpu_columns(versus.get(r.layer.name))} for r in runs])


_GPU_COLUMNS = ("gpu_backend", "gpu_ms", "gpu_pct_peak", "proj_equal_peak_ms",
                "proj_equal_peak_speedup", "proj_equal_peak_bw_ms", "proj_equal_peak_bw_speedup")


def _gpu_columns(row: dict | None) -> dict:
    return {c: (row or {}).get(c, "") for c in _GPU_COLUMNS}


def _echo_gpu(data: dict, versus: dict, runs: list) -> None:
    """The GPU block of ``model run``: a line a layer measured, or why there is none."""
    if not versus:
        gpu = data.get("provenance", {}).get("gpu", "the GPU")
        if data.get("kind") == "serving":
            what = ("the serving traces' decode batches (lengths: python "
                    "scripts/gpu/serving_traces.py decode|mla; --page-size 16 | 64)")
        else:
            ns = sorted({m["n"] for m in data["measurements"] if isinstance(m.get("n"), int)})
            what = f"one prompt of {', '.join(map(str, ns))} tokens (--prefill N)"
            if data.get("traces", {}).get("prefill_lengths"):
                what += (" and the serving trace's varlen prefill (--seqlens @FILE of "
                         "python scripts/gpu/serving_traces.py prefill)")
        click.echo(f"  GPU: none measured for this batch ({gpu} ran {what})")
        return
    g0 = next(iter(versus.values()))
    fi = g0.get("flashinfer") if all(g["gpu_backend"].startswith("flashinfer")
                                     for g in versus.values()) else None
    click.echo(f"  GPU: {g0['gpu']}, bf16, the fastest kernel measured for the layer"
               + (f" (FlashInfer {fi})" if fi else ""))
    click.echo(f"  acc.: this run scaled to the GPU's {g0['gpu_peak_tflops']:g} TFLOP/s (at "
               f"peak), and to those and its {g0['gpu_bandwidth_tbs']:g} TB/s (+ bandwidth)")
    click.echo(f"  {'layer':<12} {'kernel':<22} {'GPU a layer':>12} {'GPU/peak':>9} "
               f"{'acc. at peak':>13} {'+ bandwidth':>12} {'GPU ÷ acc.':>10}")
    for name, g in versus.items():
        click.echo(f"  {name:<12} {g['gpu_backend']:<22} {_time(g['gpu_ms'] * 1e3):>12} "
                   f"{g['gpu_pct_peak']:>8.1f}% {_time(g['proj_equal_peak_ms'] * 1e3):>13} "
                   f"{_time(g['proj_equal_peak_bw_ms'] * 1e3):>12} "
                   f"{g['proj_equal_peak_bw_speedup']:>9.2f}×")
    missing = [f"{name}: {', '.join(g['gpu_not_measured'])}" for name, g in versus.items()
               if g.get("gpu_not_measured")]
    if missing:
        click.echo(f"  (not measured for {'; '.join(missing)}: the GPU run's time was up "
                   f"before they compiled)")
    counts = [(versus[r.layer.name], r.layer.count) for r in runs if r.layer.name in versus]
    if len(versus) == len(runs):
        gpu_us = sum(g["gpu_ms"] * 1e3 * c for g, c in counts)
        acc_us = sum(g["proj_equal_peak_bw_ms"] * 1e3 * c for g, c in counts)
        click.echo(f"  per forward pass: GPU {_time(gpu_us)}, acc. + bandwidth {_time(acc_us)}"
                   f" ({gpu_us / acc_us:.2f}×)")


def _mb(b: int) -> str:
    return f"{b / 1e6:,.1f} MB" if b >= 1e5 else f"{b / 1e3:,.1f} KB"


def _time(us: float) -> str:
    return f"{us / 1000:,.3f} ms" if us >= 1000 else f"{us:,.1f} µs"
