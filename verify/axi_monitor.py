"""An AXI4 / AXI4-Lite protocol monitor: the rules a real interconnect enforces, checked on
every cycle the bus is active (AMBA AXI4, A3.2.1 handshakes, A3.4 bursts).

Rules, each with a name a violation carries:

* ``valid-held``: a VALID that was high without READY stays high the next cycle;
* ``payload-stable``: and its payload (address, length, data, strobes, response …) is unchanged;
* ``burst-4k``: a burst never crosses a 4 KB line;
* ``burst-len``: at most 256 beats (``len`` ≤ 255);
* ``burst-size``: ``size`` is the bus width;
* ``burst-type``: INCR;
* ``wlast``: WLAST is high on the last beat of its burst and only there (so the W beats of a
  burst number ``AWLEN + 1``);
* ``write-open``: every write burst begun is completed (checked by :meth:`finish`).

The monitor is pure Python over per-cycle values (``step(cycle, values)``), so its own tests
feed it synthetic traces; the test bench feeds it the DUT's ports.
"""

from __future__ import annotations

from collections import deque

__all__ = ["AxiMonitor", "CHANNELS", "LITE_CHANNELS", "sample"]

# channel → (valid, ready, payload signals); names without the port prefix
CHANNELS = {
    "ar": ("arvalid", "arready", ("araddr", "arlen", "arsize", "arburst")),
    "r": ("rvalid", "rready", ("rdata", "rresp", "rlast")),
    "aw": ("awvalid", "awready", ("awaddr", "awlen", "awsize", "awburst")),
    "w": ("wvalid", "wready", ("wdata", "wstrb", "wlast")),
    "b": ("bvalid", "bready", ("bresp",)),
}
LITE_CHANNELS = {
    "ar": ("arvalid", "arready", ("araddr",)),
    "r": ("rvalid", "rready", ("rdata", "rresp")),
    "aw": ("awvalid", "awready", ("awaddr",)),
    "w": ("wvalid", "wready", ("wdata", "wstrb")),
    "b": ("bvalid", "bready", ("bresp",)),
}


def sample(handles) -> dict:
    """``{name: value}`` of cocotb handles ``[(name, handle)]``; a value with X or Z bits (Icarus
    before a signal is first driven) reads as -1, so it compares unequal to any driven value."""
    out = {}
    for n, h in handles:
        try:
            out[n] = int(h.value)
        except ValueError:
            out[n] = -1
    return out


class AxiMonitor:
    """Checks one AXI4 (``lite=False``) or AXI4-Lite port.

    Parameters
    ----------
    name : str
        The port's name in messages (``m_axi``, ``m_axi_insn``, ``s_axil``).
    beat_bytes : int
        Bytes per beat (AXI4: the size every burst must use).
    channels : iterable of str
        The channels the port has (a read-only port: ``("ar", "r")``).
    lite : bool
        AXI4-Lite: no bursts, only the handshake rules.
    """

    def __init__(self, name: str, beat_bytes: int, channels=("ar", "r", "aw", "w", "b"),
                 lite: bool = False, max_kept: int = 50):
        self.name = name
        self.beat_bytes = beat_bytes
        self.table = {c: (LITE_CHANNELS if lite else CHANNELS)[c] for c in channels}
        self.lite = lite
        self.max_kept = max_kept
        self.violations: list[str] = []
        self.count = 0
        self.checked = 0                 # cycles seen
        self.handshakes = dict.fromkeys(self.table, 0)
        self._prev: dict | None = None
        self._prev_k: int | None = None
        self._aw = deque()               # beats of write bursts whose W beats are due
        self._w_early = deque()          # WLAST of W beats ahead of their AW
        self._w_beat = 0                 # beats of the current write burst seen

    def _fail(self, k: int, rule: str, what: str) -> None:
        self.count += 1
        if len(self.violations) < self.max_kept:
            self.violations.append(f"cycle {k}: {self.name}: {rule}: {what}")

    def step(self, k: int, v: dict) -> None:
        """Check cycle ``k`` with the port's values ``v`` (signal name → int, sampled after
        the cycle's combinational settling, before the next edge)."""
        self.checked += 1
        prev, pk = self._prev, self._prev_k
        for ch, (valid, ready, payload) in self.table.items():
            if prev is not None and prev[valid] and not prev[ready]:
                if pk != k - 1:
                    self._fail(k, "valid-held", f"{ch.upper()} waited at cycle {pk} and the "
                               "cycles between were not observed")
                elif not v[valid]:
                    self._fail(k, "valid-held", f"{ch.upper()}VALID fell without a handshake")
                else:
                    changed = [p for p in payload if v[p] != prev[p]]
                    if changed:
                        self._fail(k, "payload-stable", f"{ch.upper()} changed "
                                   f"{', '.join(changed)} while waiting for READY")
            if v[valid] and v[ready]:
                self.handshakes[ch] += 1
                if not self.lite:
                    self._handshake(k, ch, v)
        self._prev, self._prev_k = dict(v), k

    def _handshake(self, k: int, ch: str, v: dict) -> None:
        if ch in ("ar", "aw"):
            addr, length = v[f"{ch}addr"], v[f"{ch}len"]
            size, burst = v[f"{ch}size"], v[f"{ch}burst"]
            beats = length + 1
            if beats > 256:
                self._fail(k, "burst-len", f"{ch.upper()} of {beats} beats")
            if (1 << size) != self.beat_bytes:
                self._fail(k, "burst-size", f"{ch.upper()}SIZE {size} on a "
                           f"{self.beat_bytes}-byte bus")
            if burst != 1:
                self._fail(k, "burst-type", f"{ch.upper()}BURST {burst} (INCR is 1)")
            last = addr + beats * (1 << size) - 1
            if addr // 4096 != last // 4096:
                self._fail(k, "burst-4k", f"{ch.upper()} {addr:#x} + {beats} beats crosses "
                           f"{(last // 4096) * 4096:#x}")
            if ch == "aw":
                self._aw.append(beats)
                while self._w_early and self._aw:
                    self._w_beat_done(k, self._w_early.popleft())
        elif ch == "w":
            if self._aw:
                self._w_beat_done(k, v["wlast"])
            else:
                self._w_early.append(v["wlast"])

    def _w_beat_done(self, k: int, wlast: int) -> None:
        beats = self._aw[0]
        self._w_beat += 1
        last = self._w_beat == beats
        if bool(wlast) != last:
            self._fail(k, "wlast", f"W beat {self._w_beat} of {beats} with WLAST={wlast}")
        if last:
            self._aw.popleft()
            self._w_beat = 0

    def reset(self) -> None:
        """The port was reset (AXI4 A3.1.2: VALIDs go low, transactions are abandoned): what
        was waiting or open is forgotten."""
        self._prev = self._prev_k = None
        self._aw.clear()
        self._w_early.clear()
        self._w_beat = 0

    def finish(self, k: int) -> None:
        """The end of the run: every write burst begun must have been completed."""
        if self._aw or self._w_early:
            self._fail(k, "write-open", f"{len(self._aw)} write burst(s) not completed "
                       f"({self._w_beat} beats of the first sent)")

    def report(self) -> dict:
        return {"port": self.name, "violations": self.count, "cycles": self.checked,
                "handshakes": dict(self.handshakes), "first": self.violations}
