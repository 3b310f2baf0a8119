"""The model zoo (``attenio model``, model/zoo.toml): the models and the values of their
published configs, each layer type run as the workload it says (its window as
FlashAttention's ``(window − 1, 0)``, causal, its heads and head dim, its cap and sinks), the
layers the RTL cannot run yet listed with the reason, and the CLI's reports and refusals."""

import json

import pytest
from click.testing import CliRunner

from attenio.app.cli import main
from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.model import zoo
from attenio.sim.plan import default_scale
from attenio.sim.schedule import schedule
from attenio.sim.zoo import run_model


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_the_zoo_holds_the_models_with_their_configs_values():
    ms = zoo.models()
    assert len(ms) >= 10
    for m in ms.values():
        assert m.source.startswith("https://huggingface.co/") and m.layers
        assert all(lt.count > 0 and lt.heads % lt.kv_heads == 0 for lt in m.layers)
    oss = {lt.name: lt for lt in zoo.get("gpt-oss-20b").layers}
    assert (oss["window"].heads, oss["window"].kv_heads, oss["window"].head_dim) == (64, 8, 64)
    assert oss["window"].window == 128 and oss["window"].sinks and oss["full"].sinks
    assert zoo.get("gpt-oss-20b").layer_count == 24 and zoo.get("gpt-oss-120b").layer_count == 36
    g27 = zoo.get("gemma-2-27b").layers
    assert all(lt.softcap == 50.0 and abs(lt.softmax_scale - 1 / 12) < 1e-15 for lt in g27)
    assert [lt.window for lt in zoo.get("gemma-3-12b").layers] == [1024, None]
    assert [lt.count for lt in zoo.get("gemma-3-12b").layers] == [40, 8]      # 5 local : 1
    ds = {lt.name: lt for lt in zoo.get("deepseek-v3").layers}
    assert (ds["mla-decode"].head_dim, ds["mla-decode"].head_dim_v) == (576, 512)
    assert (ds["mla-prefill"].head_dim, ds["mla-prefill"].head_dim_v) == (192, 128)
    assert zoo.units_needed(zoo.get("gemma-2-9b")) == ["softcap"]
    assert zoo.units_needed(zoo.get("gpt-oss-20b")) == ["sinks"]
    with pytest.raises(ConfigError, match="known models: llama-3.1-8b"):
        zoo.get("llama-9")


def test_a_layer_type_runs_as_the_workload_it_says():
    hw = C.preset("fpga+sinks")
    runs = run_model(hw, zoo.get("gpt-oss-20b"), "prefill", n=300)
    assert [r.layer.name for r in runs] == ["window", "full"] and not any(r.refused for r in runs)
    for r, left in zip(runs, (127, -1), strict=True):
        wl = C.Workload(seq_q=300, seq_k=300, head_dim=64, heads=64, kv_heads=8, causal=True,
                        window_left=left, window_right=0 if left >= 0 else -1)
        sch = schedule(hw, wl, keep_spans=False, scale=default_scale(hw, wl, sinks=[0.0] * 64))
        assert (r.cycles, r.read_bytes, r.write_bytes) == (sch.total_cycles, sch.read_bytes,
                                                           sch.write_bytes)
        assert r.time_us == pytest.approx(sch.total_cycles / hw.clock_mhz)
    assert runs[0].cycles < runs[1].cycles          # the window sees fewer keys


def test_mla_layers_run_and_a_preset_too_narrow_says_why():
    # asplos26 holds head dims to 256: the absorbed decode's 576 is refused by name
    runs = run_model(C.asplos26(), zoo.get("deepseek-v3"), "decode", decode=True,
                     cache_lens=[100, 37])
    assert [r.layer.name for r in runs] == ["mla-decode"]
    assert "head_dim=576" in runs[0].refused and runs[0].cycles is None
    # with head dims to 576 (configs/asplos26-576.toml) it runs, V read from K's rows: the
    # bytes read are the latent rows once (and Q), none for V
    wide = C.replace(C.asplos26(), max_head_dim=576)
    runs = run_model(wide, zoo.get("deepseek-v3"), "decode", decode=True, cache_lens=[100, 37],
                     page_size=64)
    r = runs[0]
    assert r.refused is None and r.workload.v_in_k and r.workload.d_v == 512
    latent = 137 * 576 * 2 + 2 * 128 * 576 * 2        # K rows once, Q rows
    assert latent <= r.read_bytes <= 1.02 * latent
    # MLA prefill (192 and 128) runs on asplos26 itself
    pre = run_model(C.asplos26(), zoo.get("deepseek-v3"), "prefill", n=256)
    assert [r.layer.name for r in pre] == ["mla-prefill"] and pre[0].refused is None
    assert pre[0].cycles > 0 and pre[0].workload.d_v == 128


def test_cli_list_show_run(tmp_path):
    r = run("model", "list")
    assert r.exit_code == 0 and "gpt-oss-20b" in r.output and "deepseek-v3" in r.output
    r = run("model", "show", "gemma-2-27b")
    assert r.exit_code == 0 and "softcap 50" in r.output and "config.json" in r.output
    assert "+softcap" in r.output
    r = run("model", "run", "gpt-oss-20b", "--prefill", "512", "--json",
            str(tmp_path / "r.json"))
    assert r.exit_code == 0, r.output
    assert "preset=asplos26+sinks" in r.output and "attention per forward pass" in r.output
    assert len(r.output.strip().splitlines()) <= 40
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["complete"] and [x["layer"] for x in rep["layers"]] == ["window", "full"]
    assert rep["attention_us_per_forward"] == pytest.approx(
        sum(x["time_us_all_layers"] for x in rep["layers"]))
    r = run("model", "run", "deepseek-v3", "--decode", "--cache-lens", "64,100")
    assert r.exit_code == 0 and "not run:" in r.output and "none (no layer type" in r.output
    for args, words in ((["run", "nope", "--prefill", "8"], "known models"),
                        (["run", "qwen3-8b"], "give --prefill N"),
                        (["run", "qwen3-8b", "--decode"], "without --cache-lens"),
                        (["run", "qwen3-8b", "--cache-lens", "5"], "without --decode"),
                        (["show", "nope"], "known models")):
        r = run("model", *args)
        assert r.exit_code == 2 and words in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1
