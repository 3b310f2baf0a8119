"""Config dataclasses: validation (one case per bad field), derived widths, presets, TOML."""

import dataclasses

import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.base.tomlfile import load_toml, save_toml


def test_presets_build_and_are_frozen():
    for name in C.PRESETS:
        hw = C.preset(name)
        assert hw.macs == hw.mac_lines * hw.macs_per_line
        with pytest.raises(dataclasses.FrozenInstanceError):
            hw.mac_lines = 3  # type: ignore[misc]


def test_unknown_preset_names_the_choices():
    with pytest.raises(ConfigError, match=r"preset='nope'.*tiny, fpga, asplos26"):
        C.preset("nope")


def test_keyword_only():
    with pytest.raises(TypeError):
        C.Workload(16, 16, 8)  # type: ignore[misc]


BAD_HW = [
    ("mac_lines", 0), ("mac_lines", -4), ("mac_lines", 2.5), ("mac_lines", True),
    ("macs_per_line", 0),
    ("data_bits", 7), ("data_bits", 32), ("data_bits", "8"),
    ("tile_rows", 0),
    ("max_head_dim", 0), ("max_head_dim", 2048),
    ("kv_ring_depth", 1),
    ("exp_lanes", 0),
    ("axi_data_bits", 48),
    ("dram_latency", -1),
    ("dram_bytes_per_cycle", 0),
    ("clock_mhz", 0), ("clock_mhz", float("nan")), ("clock_mhz", "fast"),
    ("max_seq_len", 0), ("max_seq_len", 1 << 30),
    ("softmax_block", 0),
    ("max_keys_per_step", 3), ("max_keys_per_step", 8),
    ("sram_bytes", 0),
    ("numerics", {"exp_frac_bits": 16}),
]


@pytest.mark.parametrize("field,value", BAD_HW, ids=[f"{f}={v!r}" for f, v in BAD_HW])
def test_bad_hardware_field_is_named(field, value):
    with pytest.raises(ConfigError) as e:
        C.replace(C.tiny(), **{field: value})
    assert str(e.value).startswith(f"{field}=")
    assert "invalid" in str(e.value)


BAD_NUMERICS = [
    ("logit_frac_bits", 2), ("exp_frac_bits", 40), ("exp_segments_log2", 0),
    ("exp_segments_log2", 14),  # not below logit_frac_bits
    ("scale_mult_bits", 4), ("recip_seed_log2", 1), ("recip_frac_bits", 30),
    ("out_frac_bits", -1), ("finalize_guard_bits", 8),  # not above out_frac_bits
]


@pytest.mark.parametrize("field,value", BAD_NUMERICS, ids=[f"{f}={v}" for f, v in BAD_NUMERICS])
def test_bad_numerics_field_is_named(field, value):
    with pytest.raises(ConfigError, match=rf"^{field}={value}"):
        C.Numerics(**{field: value})


def test_widths_the_model_cannot_carry_are_refused():
    # 16-bit data with 2**24 keys would need a 57-bit O accumulator.
    with pytest.raises(ConfigError, match=r"max_seq_len=16777216.*O accumulator"):
        C.replace(C.asplos26(), max_seq_len=1 << 24)


BAD_WL = [
    ("seq_q", 0), ("seq_k", -1), ("head_dim", 0), ("heads", 0), ("kv_heads", 0),
    ("batch", 0), ("causal", 1), ("seq_q", 1.5),
]


@pytest.mark.parametrize("field,value", BAD_WL, ids=[f"{f}={v!r}" for f, v in BAD_WL])
def test_bad_workload_field_is_named(field, value):
    base = dict(seq_q=8, seq_k=8, head_dim=4)
    base[field] = value
    with pytest.raises(ConfigError, match=rf"^{field}="):
        C.Workload(**base)


def test_kv_heads_must_divide_heads():
    with pytest.raises(ConfigError, match=r"kv_heads=3.*divide heads=8"):
        C.Workload(seq_q=8, seq_k=8, head_dim=4, heads=8, kv_heads=3)


def test_workload_checked_against_hardware():
    hw = C.tiny()
    hw.check_workload(C.Workload.square(64, 64))
    with pytest.raises(ConfigError, match=r"head_dim=65.*\[1, 64\]"):
        hw.check_workload(C.Workload.square(64, 65))
    with pytest.raises(ConfigError, match=r"seq_k=5000"):
        hw.check_workload(C.Workload(seq_q=8, seq_k=5000, head_dim=8))


def test_derived_widths_follow_their_derivations():
    hw = C.fpga()
    # int8, d ≤ 128: |s| ≤ 128·128·128 = 2**21 needs 23 signed bits.
    assert hw.score_bits == 23
    assert hw.logit_bits == 23 + hw.numerics.scale_mult_bits
    assert hw.exp_bits == hw.numerics.exp_frac_bits + 1
    # 65536 keys · (2**17 - 1) · 128 < 2**40: 40 magnitude bits plus a sign.
    assert hw.acc_bits == 41
    assert hw.row_sum_bits == 16 + 17 + 1
    assert hw.out_bits == 8 + hw.numerics.out_frac_bits


def test_toml_round_trip(tmp_path):
    hw = C.replace(C.fpga(), dram_latency=42, numerics=C.Numerics(out_frac_bits=6))
    wl = C.Workload(seq_q=100, seq_k=200, head_dim=32, heads=4, kv_heads=2, causal=True)
    path = tmp_path / "c.toml"
    save_toml(path, hw, wl)
    hw2, wl2 = load_toml(path)
    assert hw2 == hw and wl2 == wl


def test_toml_preset_with_overrides(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[hardware]\npreset = "tiny"\ndram_latency = 7\n'
                    '[hardware.numerics]\nout_frac_bits = 4\n')
    hw, wl = load_toml(path)
    assert wl is None
    assert hw == C.replace(C.tiny(), dram_latency=7, numerics=C.Numerics(out_frac_bits=4))


@pytest.mark.parametrize("text,match", [
    ('[hardware]\npreset = "tiny"\ntile_rows = "many"\n', r"^hardware\.tile_rows='many'"),
    ('[hardware]\npreset = "tiny"\nwarp_drive = 1\n', r"^hardware\.warp_drive=1.*unknown field"),
    ('[hardware]\npreset = "huge"\n', r"^preset='huge'"),
    ('[hardware.numerics]\nexp_frac_bits = "x"\n', r"mac_lines|exp_frac_bits"),
    ('[workload]\nseq_q = 4\nseq_k = 4\nhead_dim = 0\n', r"^workload\.head_dim=0"),
    ('[workload]\nseq_q = 4\nseq_k = 4\nhead_dim = 2\ncausal = "yes"\n', r"workload\.causal"),
    ('[gpu]\nx = 1\n', r"^gpu=.*unknown table"),
    ('this is not toml', r"not valid TOML"),
])
def test_bad_toml_is_named(tmp_path, text, match):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_toml(path)


def test_missing_toml_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_toml(tmp_path / "absent.toml")


def test_fpga_preset_has_the_256_row_tile_and_the_512_row_config_is_the_briefs():
    from pathlib import Path

    configs = Path(__file__).parent.parent / "configs"
    assert C.fpga().tile_rows == 256
    hw, wl = load_toml(configs / "fpga-512.toml")
    assert wl is None
    # the brief's 8 × 8 array with its 512-row tile; the preset is 4 × 8 (the one that routes)
    # (the configurations routed before the preset's P buffer moved to block RAM keep their
    # tables in LUT RAM and each O bank in one memory)
    old = {"table_ram": "lut", "obuf_slices": False}
    assert hw == C.replace(C.fpga(), tile_rows=512, mac_lines=8, exp_lanes=8, **old)
    assert load_toml(configs / "fpga-8x8.toml")[0] == C.replace(C.fpga(), mac_lines=8,
                                                                   exp_lanes=8, **old)
    assert load_toml(configs / "fpga-4x8.toml")[0] == C.fpga()


def test_shipped_closure_config_is_the_fpga_datapath_on_4x4_macs():
    from pathlib import Path

    hw, _ = load_toml(Path(__file__).parent.parent / "configs" / "fpga-closure-4x4.toml")
    assert hw == C.replace(C.fpga(), mac_lines=4, macs_per_line=4, tile_rows=64,
                           max_head_dim=64, kv_ring_depth=8, exp_lanes=4, axi_data_bits=32,
                           dram_bytes_per_cycle=4, table_ram="lut", obuf_slices=False)


def test_rtl_rules_live_in_the_config():
    # every command refuses (or marks model-only) alike: no elaboration needed to know
    assert C.tiny().rtl_problems() == [] and C.fpga().rtl_problems() == []
    (field, value, why), = C.asplos26().rtl_problems()
    assert (field, value) == ("exp_lanes", 128) and "mac_lines (64)" in why
    with pytest.raises(C.ConfigError, match=r"mac_lines=3 .*power of two"):
        C.replace(C.tiny(), mac_lines=3, exp_lanes=3, max_keys_per_step=2).check_rtl()


def test_derived_geometry():
    hw = C.fpga()
    assert (hw.ring_rows, hw.row_groups, hw.words_per_row) == (8, 64, 16)
    assert hw.words(59) == 8 and hw.row_elements(59) == 64
    assert C.asplos26().out_element_bytes == 3 and hw.out_element_bytes == 2
    wl = C.Workload(seq_q=10, seq_k=20, head_dim=59, heads=2, batch=3)
    assert hw.o_bytes(wl) == 3 * 2 * 10 * 64 * 2


@pytest.mark.parametrize("opts, field", [({"nk": 0}, "seq_k"), ({"kv_heads": 0}, "kv_heads"),
                                         ({"kv_heads": 3, "heads": 4}, "kv_heads"),
                                         ({"d": 300}, "head_dim")])
def test_workload_from_options_refuses_rather_than_defaults(opts, field):
    with pytest.raises(C.ConfigError, match=field):
        C.Workload.from_options(C.fpga(), **{"n": 64, "d": 64, **opts})


def test_workload_from_options_defaults():
    wl = C.Workload.from_options(C.asplos26(), n=64, d=32, heads=4)
    assert (wl.seq_k, wl.kv_heads) == (64, 4)


def test_table_ram_is_checked_and_reaches_the_verilog():
    """table_ram puts the small per-row tables in distributed ("lut") or block RAM: a bad value
    is refused by name; the Verilog asks synthesis for distributed RAM only with "lut"."""
    from attenio.hw.build import to_verilog
    from attenio.hw.top import AttenIOTop

    with pytest.raises(ConfigError, match=r"^table_ram='bram' is invalid"):
        C.replace(C.tiny(), table_ram="bram")
    lut = to_verilog(AttenIOTop(C.tiny()), "attenio_top")
    block = to_verilog(AttenIOTop(C.replace(C.tiny(), table_ram="block")), "attenio_top")
    assert lut.count('ram_style = "distributed"') >= 3 and 'ram_style = "block"' not in lut
    assert block.count('ram_style = "distributed"') == 0
    assert block.count('ram_style = "block"') == lut.count('ram_style = "distributed"')
    # "pbuf-block": the P buffer's banks alone in block RAM
    pb = to_verilog(AttenIOTop(C.replace(C.tiny(), table_ram="pbuf-block")), "attenio_top")
    p = C.tiny().mac_lines
    assert pb.count('ram_style = "block"') == p
    assert pb.count('ram_style = "distributed"') == lut.count('ram_style = "distributed"') - p


def test_obuf_slices_reach_the_verilog():
    """obuf_slices builds each O bank as memories one DP16KD wide (tiny: 256 words of 148 bits,
    so four of 36 bits and one of 4), each with its own address register copies."""
    import re

    from attenio.base.ecp5 import obuf_slice_bits
    from attenio.hw.build import to_verilog
    from attenio.hw.top import AttenIOTop

    with pytest.raises(ConfigError, match=r"^obuf_slices=1 is invalid"):
        C.replace(C.tiny(), obuf_slices=1)
    assert (obuf_slice_bits(C.tiny()), obuf_slice_bits(C.fpga())) == (148, 18)
    for sliced, widths in ((False, [148]), (True, [36, 36, 36, 36, 4])):
        v = to_verilog(AttenIOTop(C.replace(C.tiny(), obuf_slices=sliced)), "attenio_top")
        mems = {name: int(hi) + 1
                for hi, name in re.findall(r"reg \[(\d+):0\] (obuf\w+) \[", v)}
        p = C.tiny().mac_lines
        assert sorted(mems) == sorted(f"obuf{i}_{j}" for i in range(p) for j in range(len(widths)))
        assert [mems[f"obuf0_{j}"] for j in range(len(widths))] == widths
        assert len(re.findall(r"reg \[\d+:0\] o_ra_\d+ ", v)) == p * len(widths)


def test_table_ram_in_the_block_ram_count():
    # the resource model counts the tables table_ram puts in block RAM: the 8 × 4
    # configuration measured 98 DP16KD with "lut" and 130 with "block" (docs/fpga.md,
    # data/fpga/route-fpga-8x4-blockram-2026-12-03-attempt.json); "pbuf-block" adds a block a
    # line (the P buffer's bank)
    from attenio.base.tomlfile import load_toml
    from attenio.sim.cost import fpga_area

    hw, _ = load_toml("configs/fpga-8x4.toml")
    got = {t: fpga_area(C.replace(hw, table_ram=t))["DP16KD"]
           for t in ("lut", "pbuf-block", "block")}
    assert got == {"lut": 98, "pbuf-block": 98 + hw.mac_lines, "block": 130}


def test_fanout_copies_reach_the_verilog():
    """Registers copied for fan-out (issue #47; scripts/fanout.py measures their loads in the
    synthesized netlist): START's reset a core stage, lbusy's copies for the load engine's
    idle loads, finalize's lane select a slice of the O word."""
    import re

    from attenio.hw.build import to_verilog
    from attenio.hw.core import CORE_STAGES
    from attenio.hw.ctrl.load import IDLE_COPIES
    from attenio.hw.finalize_stage import FIN_LANE_SLICES
    from attenio.hw.top import AttenIOTop

    v = to_verilog(AttenIOTop(C.tiny()), "attenio_top")
    assert set(re.findall(r"reg eng_rst_core_(\w+) ", v)) == set(CORE_STAGES)
    assert len(set(re.findall(r"reg lbusy_(\d+) ", v))) == IDLE_COPIES
    assert len(set(re.findall(r"reg \[\d+:0\] f_lane_(\d+) ", v))) == FIN_LANE_SLICES + 1
