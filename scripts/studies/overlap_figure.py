"""The three overlap levels at a tile boundary, from the schedule generator's spans: a Gantt of
the last steps of one tile and the first of the next (PNG), and the whole run's Perfetto trace.

    python scripts/studies/overlap_figure.py [--preset tiny] [--n 200] [--d 32] [--tile 1]
        [--png docs/img/overlap.png] [--trace FILE.json.gz]

Level 1: V(j) arrives while Q·K(j)ᵀ computes; level 2: K(j+1) while P·V(j) computes; level 3:
the next tile's Q rows while this tile's output is finalized and stored.
"""

from __future__ import annotations

import argparse

from attenio.base import config as C
from attenio.sim.schedule import schedule
from attenio.sim.trace import write_chrome_trace

TRACKS = [("Q rows (DMA read)", lambda s: s.name.startswith("LOAD_Q")),
          ("K/V blocks (DMA read)", lambda s: s.engine == "dma_read" and s.name[:2] in
           ("K ", "V ")),
          ("PE array steps", lambda s: s.engine == "pe" and s.name[:3] in ("QK ", "PV ")),
          ("finalize", lambda s: s.engine == "finalize"),
          ("O rows (DMA write)", lambda s: s.engine == "dma_write")]
COLORS = {"Q": "#4c72b0", "K": "#64b5cd", "V": "#8172b2", "QK": "#c44e52", "PV": "#dd8452",
          "FINALIZE": "#ccb974", "STORE_O": "#55a868", "LOAD_Q": "#4c72b0"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--tile", type=int, default=1, help="the tile whose start is shown")
    ap.add_argument("--steps", type=int, default=3, help="K/V steps shown on each side")
    ap.add_argument("--png", default="docs/img/overlap.png")
    ap.add_argument("--trace", help="also write the run's Perfetto trace here")
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hw = C.preset(args.preset)
    sch = schedule(hw, C.Workload.square(args.n, args.d))
    if args.trace:
        write_chrome_trace(sch, args.trace)
    t = args.tile
    prev = [s for s in sch.spans if s.args.get("tile") == t - 1 and s.engine == "pe"
            and s.name.startswith(("QK ", "PV "))]
    nxt = [s for s in sch.spans if s.args.get("tile") == t and s.engine == "pe"
           and s.name.startswith(("QK ", "PV "))]
    if not prev or not nxt:
        raise SystemExit(f"error: tile {t} has no tile before it, or no steps (tiles: "
                         f"{1 + max(s.args.get('tile', 0) for s in sch.spans)})")
    # the window: the last steps of tile t-1 (the model simulates them one by one, after the
    # steady state it skips) to the first steps of tile t
    step = max(s.end - s.start for s in prev)
    end = max(s.end for s in prev)
    lo = min(s.start for s in prev if s.start >= end - 2 * args.steps * step) - step // 2
    hi = sorted(s.end for s in nxt)[min(len(nxt), 2 * args.steps) - 1]
    fig, ax = plt.subplots(figsize=(12, 3.6))
    for row, (_, pick) in enumerate(TRACKS):
        for s in sch.spans:
            if not pick(s) or s.end < lo or s.start > hi:
                continue
            kind = s.name.split()[0]
            ax.barh(row, s.end - s.start, left=s.start, height=0.6,
                    color=COLORS.get(kind, "#999999"), edgecolor="white", linewidth=0.5)
            if s.end - s.start > (hi - lo) / 60:
                ax.text((max(s.start, lo) + min(s.end, hi)) / 2, row,
                        s.name.replace(" t", " tile ") if kind in ("LOAD_Q", "FINALIZE",
                                                                  "STORE_O") else s.name,
                        ha="center", va="center", fontsize=6, color="white")
    ax.set_yticks(range(len(TRACKS)), [name for name, _ in TRACKS])
    ax.invert_yaxis()
    ax.set_xlim(lo, hi)
    ax.set_xlabel("cycle")
    wl = sch.workload
    ax.set_title(f"{args.preset}, N={wl.seq_q} d={wl.head_dim}: end of tile {t - 1}, start of "
                 f"tile {t} (schedule generator; the RTL's cycles equal it)", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    print(f"wrote {args.png}" + (f" and {args.trace}" if args.trace else ""))


if __name__ == "__main__":
    main()
