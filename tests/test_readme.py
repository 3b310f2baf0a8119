"""Every command the README shows runs, exactly as written: the fast ones in the default suite,
those of several seconds (RTL simulation, Verilog, the dataflow and GPU comparisons) behind the
slow marker; those that take minutes or need the FPGA tools (the fpga-preset simulation, synth,
board) are left to their own targets."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SKIP = ("--preset fpga --n 1024", "attenio synth", "attenio board")
SECONDS = ("attenio simulate", "attenio verilog", "attenio dataflows", "attenio compare")


def commands():
    block = re.search(r"## Command line\n\n```sh\n(.*?)```", README, re.S).group(1)
    for line in block.splitlines():
        cmd = line.split("#", 1)[0].strip()
        if cmd and not any(s in cmd for s in SKIP):
            yield cmd


def test_the_list_is_not_empty():
    assert len(list(commands())) >= 12


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    (d / "data").symlink_to(ROOT / "data")
    (d / "build").mkdir()
    # the user's own tensors the README's accuracy example reads
    import numpy as np

    rng = np.random.default_rng(0)
    np.savez(d / "qkv.npz", q=rng.standard_normal((2, 128, 64)),
             k=rng.standard_normal((2, 128, 64)), v=rng.standard_normal((2, 128, 64)))
    return d


# What each command must print (besides exiting 0): the result the README says it gives.
PRINTS = {
    "config show": ["derived widths (bits):", "RTL: "],
    "config save": ["wrote hw.toml"],
    "golden": ["result               PASS"],
    "accuracy": ["/ bf16", "int8 (fpga)"],
    "schedule": ["closed form          equal", "PE utilization"],
    "dataflows": ["geomean", "bandwidth sweep"],
    "compare": ["speedup over the measured GPU", "wrote roofline.png"],
    "explore": ["Pareto front", "infeasible)"],
    "registers": ["wrote attenio_regs.h"],
    "verilog": ["top module attenio_top"],
    "simulate": ["result               PASS", "0 violations"],
    "model list": ["gpt-oss-20b", "deepseek-v3"],
    "model show": ["source   https://huggingface.co/", "softcap 50", "needs    +softcap"],
    "model run": ["attention per forward pass:", "window", "full"],
}


def expected_output(cmd: str) -> list[str]:
    argv = shlex.split(cmd)
    key = " ".join(argv[1:3]) if argv[1] in ("config", "model") else argv[1]
    if key == "golden" and "--lse" in argv:
        return PRINTS[key] + ["log-sum-exp (lse)", "rows that see no key agree"]
    if key == "compare" and any(a.endswith((".json", "-serving")) for a in argv):
        return ["[peak+bw] ms", "sdpa-gathered-pages"]      # the serving workloads
    return PRINTS[key]


def test_every_command_has_its_expected_output():
    for cmd in commands():
        assert expected_output(cmd), cmd


@pytest.mark.parametrize("cmd", [
    pytest.param(c, marks=pytest.mark.slow) if c.startswith(SECONDS) else c for c in commands()])
def test_readme_command(cmd, workdir):
    argv = shlex.split(cmd)
    assert argv[0] == "attenio"
    exe = Path(sys.executable).with_name("attenio")
    env = dict(os.environ, ATTENIO_BUILD=str(ROOT / "build"))
    r = subprocess.run([str(exe), *argv[1:]], cwd=workdir, capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    for text in expected_output(cmd):
        assert text in r.stdout, (cmd, text, r.stdout[-2000:])
    assert "FAIL" not in r.stdout and "DIFFERENT" not in r.stdout, (cmd, r.stdout[-2000:])
