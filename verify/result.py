"""What one RTL run produced and its verdict against the models (:class:`SimResult`,
returned by :func:`attenio.verify.runner.simulate`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attenio.base.errors import ErrorCode
from attenio.model.golden import MAX_REL_BOUND, MEAN_REL_BOUND, within_bounds
from attenio.sim.timeline import Schedule

__all__ = ["SimResult", "HOST_CYCLES"]


# the testbench counts a run from the START write's handshake to the cycle it sees the
# interrupt: the RTL's CYCLES plus the register write reaching CTRL, the engine's registered
# reset and irq's register
HOST_CYCLES = 4


@dataclass
class SimResult:
    """What one RTL run produced and how it compares (see :func:`simulate`)."""

    status: int
    error: ErrorCode
    done: bool
    timed_out: bool
    out: np.ndarray | None           # [batch, heads, seq_q, d] as the RTL wrote it
    golden: np.ndarray | None
    counters: dict[str, int]
    predicted_cycles: int
    predicted_read: int
    predicted_write: int
    pe_busy_model: int
    useful_macs: int                 # MACs the workload needs (the model's count)
    wall_s: float
    sim_cycles: int
    errors: dict[str, float] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    schedule: Schedule | None = None  # the schedule whose program ran (tiling, timeline)
    p_stall: float = 0.0
    # AXI bursts the schedule requests ("read", "write", "fetch"); None where the run is not
    # the generated program alone (a replaced or moved program, a reset, abort or rerun)
    predicted_requests: dict | None = None
    # with lse: the statistics words the RTL wrote after its O rows and the integer model's
    # (bytes, [batch, heads, seq_q, word bytes]; contract.formats.stats_word_bytes)
    stats: np.ndarray | None = None
    golden_stats: np.ndarray | None = None

    def failures(self) -> list[str]:
        """Why this run fails its rules, one line each (empty: it passes). The verdict that
        ``attenio simulate`` prints and the tests assert: it ended with done and no error, the
        output is bit-exact with the integer model and (if measured) within the accuracy
        contract against float64, the RTL's byte counters equal the schedule's, no AXI
        violation and no byte written outside the output region, and its cycles keep their
        rule: equal to the prediction without stalls (the schedule generator is cycle-exact),
        not below it with them (the PE array's busy cycles equal too, without stalls)."""
        out = []
        if self.timed_out or not self.done:
            out.append(f"the run did not end (done={int(self.done)}, timed out="
                       f"{int(self.timed_out)})")
        if self.error != ErrorCode.NONE:
            out.append(f"the run ended with error {self.error.name}")
        if out:
            return out        # a run that stopped early has no output or counters to judge
        if not self.bit_exact:
            out.append(f"{self.mismatches} output elements differ from the integer model")
        if self.stats_mismatches:
            out.append(f"{self.stats_mismatches} rows' statistics words (lse) differ from the "
                       "integer model's")
        if self.errors and not within_bounds(self.errors):
            out.append(f"error against float64 max {self.errors['max_rel']:.2e}, mean "
                       f"{self.errors['mean_rel']:.2e} of V's range: outside the contract "
                       f"({MAX_REL_BOUND:.0e}, {MEAN_REL_BOUND:.0e})")
        c = self.counters
        for name, want in (("bytes_rd", self.predicted_read), ("bytes_wr", self.predicted_write)):
            if c[name] != want:
                out.append(f"{name.upper()} = {c[name]:,}, the schedule predicts {want:,}")
        if not self.cycles_ok:
            out.append(f"{self.cycles:,} cycles against {self.predicted_cycles:,} predicted "
                       + (f"({self.cycle_gap:+.3%}; must be equal)" if self.p_stall == 0
                          else "under stalls (the prediction is a lower bound)"))
        if self.p_stall == 0 and c["pe_busy"] != self.pe_busy_model:
            out.append(f"PE_BUSY = {c['pe_busy']:,}, the schedule predicts "
                       f"{self.pe_busy_model:,}")
        if self.axi_violations:
            out.append(f"{self.axi_violations} AXI protocol violations: {self.axi_report[0]}")
        if self.predicted_requests is not None and "dram_bytes_read" in self.extra:
            # the RTL's own counters against what the testbench saw (its DRAM, its clock)
            for name, key in (("bytes_rd", "dram_bytes_read"), ("bytes_wr", "dram_bytes_written")):
                if c[name] != self.extra[key]:
                    out.append(f"{name.upper()} = {c[name]:,}, the DRAM moved "
                               f"{self.extra[key]:,} bytes")
            if self.sim_cycles - c["cycles"] != HOST_CYCLES:
                out.append(f"CYCLES = {c['cycles']:,}, the testbench counted {self.sim_cycles:,} "
                           f"from the start write to the interrupt (must be CYCLES + "
                           f"{HOST_CYCLES})")
        for port, ch, want in self._requests():
            if self.extra["axi"][port]["handshakes"][ch] != want:
                got = self.extra["axi"][port]["handshakes"][ch]
                out.append(f"{ch.upper()} bursts on {self.extra['axi'][port]['port']} = "
                           f"{got:,}, the schedule predicts {want:,}")
        if self.stray_bytes:
            out.append(f"{self.stray_bytes} bytes written outside the output region")
        if self.extra.get("dram_unsupported"):
            out.append(f"{self.extra['dram_unsupported']} requests the fast DRAM cannot serve "
                       "as verify/dram.py would (unaligned, or more than 64 waiting)")
        return out

    def _requests(self) -> list[tuple[int, str, int]]:
        """(monitor index, channel, predicted bursts): the data port's AR and AW, the
        program port's AR. Bursts do not depend on stalls: the rule holds under them too."""
        p = self.predicted_requests
        if p is None or len(self.extra.get("axi", [])) < 2:
            return []
        return [(0, "ar", p["read"]), (0, "aw", p["write"]), (1, "ar", p["fetch"])]

    @property
    def bit_exact(self) -> bool:
        return self.out is not None and self.golden is not None and \
            np.array_equal(self.out, self.golden) and not self.stats_mismatches

    @property
    def stats_mismatches(self) -> int:
        """Rows whose statistics word (lse) differs from the model's (0 without lse)."""
        if self.stats is None or self.golden_stats is None:
            return 0
        return int(np.count_nonzero((self.stats != self.golden_stats).any(axis=-1)))

    @property
    def mismatches(self) -> int:
        if self.out is None or self.golden is None:
            return -1
        return int(np.count_nonzero(self.out != self.golden))

    @property
    def cycles(self) -> int:
        return self.counters["cycles"]

    @property
    def cycle_gap(self) -> float:
        """(RTL − predicted) / predicted cycles."""
        return (self.cycles - self.predicted_cycles) / max(1, self.predicted_cycles)

    @property
    def cycles_ok(self) -> bool:
        """The cycles' rule: equal to the prediction without stalls (the schedule generator is
        cycle-exact), not below it with them."""
        if self.p_stall == 0:
            return self.cycles == self.predicted_cycles
        return self.cycles >= self.predicted_cycles

    @property
    def axi_violations(self) -> int:
        """AXI4 / AXI4-Lite protocol violations the monitors saw (verify/axi_monitor.py)."""
        return sum(p["violations"] for p in self.extra.get("axi", []))

    @property
    def rerun(self) -> dict | None:
        """The clean run after this one (``simulate(rerun=True)``): ``done``, ``error``,
        ``bit_exact``, ``timed_out``, ``cycles``."""
        return self.extra.get("rerun")

    @property
    def stray_bytes(self) -> int:
        """Bytes the run wrote (strobes set) outside its output region."""
        return self.extra.get("dram_stray_bytes", 0)

    @property
    def axi_report(self) -> list[str]:
        """The first violations of each port."""
        return [v for p in self.extra.get("axi", []) for v in p["first"]]

    @property
    def sim_rate(self) -> float:
        return self.sim_cycles / self.wall_s if self.wall_s > 0 else 0.0
