"""Formal AXI4 checks of the controller's managers (verify/formal.py; needs the yowasp tools and
z3 of the fpga extra, so behind the slow marker): each holds to the depth, its cover points are
reachable (the assumptions leave the cases that matter), and a unit with the old VALID-drop bug
fails it."""

import shutil

import pytest
from amaranth import Module
from amaranth.lib import wiring

from attenio.base import config as C
from attenio.verify.formal import HARNESSES, prove

TINY = C.tiny()
DEPTH = 12        # cycles; load takes about 2 minutes at 12 on this machine, far more at 16

pytestmark = pytest.mark.slow


def _tools():
    if shutil.which("yowasp-sby") is None or shutil.which("z3") is None:
        pytest.fail("the formal tools are missing: make test-slow installs them "
                    "(pip install -e '.[fpga]')")


@pytest.mark.parametrize("which", HARNESSES)
@pytest.mark.parametrize("mode", ["bmc", "cover"])
def test_manager_keeps_the_rules(which, mode):
    _tools()
    r = prove(TINY, which, depth=DEPTH, mode=mode, log=lambda *a: None)
    assert r["passed"], r["failed"] or r["log"][-3000:]


class _DropsValidOnStop(wiring.Component):
    """ProgramFetch as it was: its AR VALID fell when an error stopped the run."""

    def __init__(self, cfg):
        from attenio.hw.ctrl.fetch import ProgramFetch

        self.inner = ProgramFetch(cfg)
        super().__init__(dict(self.inner.signature.members.items()))

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        for path, member, mine in self.signature.flatten(self):
            theirs = inner
            for p in path:
                theirs = getattr(theirs, p) if isinstance(p, str) else theirs[p]
            if path == ("arvalid",):
                m.d.comb += mine.eq(theirs & ~self.stop)
            elif member.flow == wiring.In:
                m.d.comb += theirs.eq(mine)
            else:
                m.d.comb += mine.eq(theirs)
        return m


def test_the_old_bug_fails():
    _tools()
    r = prove(TINY, "fetch", depth=DEPTH, unit=_DropsValidOnStop(TINY), log=lambda *a: None)
    assert not r["passed"]
    assert r["failed"] == ["AR: VALID fell without a handshake"]
