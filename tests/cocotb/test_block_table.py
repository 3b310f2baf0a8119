"""The caller's block table on the RTL: the load engine walks the table as given (pages in
any order, a page shared by two sequences, trailing −1 entries, lengths that are not whole
pages), bit-exact with the integer model, cycles equal to the plan's, bytes equal to the pages'
rows touched plus the table entries read, and the report records the table it ran."""

import json

import pytest
from click.testing import CliRunner

from attenio.app.cli import main
from attenio.base import config as C
from attenio.verify.runner import simulate

TINY = C.tiny()

# permuted pages; page 2 shared by sequences 0 and 1 (prefix caching); −1 pads every row
TABLE = [[5, 2, 9, -1], [2, 0, -1, -1], [7, -1, -1, -1]]


def test_the_issue_case_walks_the_callers_table(tmp_path):
    path, out = tmp_path / "T.json", tmp_path / "r.json"
    path.write_text(json.dumps(TABLE))
    lens, d = [37, 20, 5], 16
    res = CliRunner().invoke(main, ["simulate", "--preset", "tiny", "--decode", "--cache-lens",
                                    ",".join(map(str, lens)), "--page-size", "16", "--d",
                                    str(d), "--block-table", str(path), "--json", str(out)])
    assert res.exit_code == 0 and "PASS" in res.output, res.output
    line = "block table          the caller's: 3 sequences, 6 pages touched of a pool of 10, 1"
    assert line + " shared" in res.output
    rep = json.loads(out.read_text())
    assert rep["block_table"] == TABLE and rep["cache_lens"] == lens
    assert rep["page_size"] == 16 and rep["source"] == "caller"
    assert rep["bit_exact"] and rep["counters"]["cycles"] == rep["predicted_cycles"]
    # Q rows, each sequence's K and V rows of the pages it touches, and one 4-byte entry per
    # page it touches (the tiny preset's AXI word holds one entry: no word is shared)
    eb = TINY.element_bytes
    touched = sum(-(-n // 16) for n in lens)
    want = len(lens) * d * eb + 2 * sum(lens) * d * eb + 4 * touched
    assert rep["counters"]["bytes_rd"] == want


def test_without_a_table_the_report_names_the_shuffle(tmp_path):
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["schedule", "--preset", "tiny", "--decode", "--cache-lens",
                                    "9,4", "--page-size", "4", "--d", "8", "--json", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert rep["source"] == "shuffle" and rep["seed"] == 0
    assert sorted(p for r in rep["block_table"] for p in r) == list(range(4))


@pytest.mark.parametrize("shape, table, scales", [
    # GQA causal prefill continuing shared prefixes, per-row Q and per-block K scales
    ({"seqlens_q": [5, 3, 8], "seqlens_k": [21, 11, 24], "head_dim": 16, "heads": 4,
      "kv_heads": 2, "causal": True, "page_size": 8},
     [[4, 1, 6, -1], [4, 3, -1, -1], [4, 1, 0, -1]], {"q_rows": True, "k_block": 4}),
    # a decode batch whose pages all come from one pool in reverse, with lse
    ({"seqlens_q": [1, 1], "seqlens_k": [7, 13], "head_dim": 8, "heads": 2, "page_size": 4,
      "lse": True}, [[5, 4], [3, 2, 1, 0]], {}),
])
def test_callers_tables_bit_exact_and_cycle_exact(shape, table, scales):
    wl = C.VarlenWorkload(**shape)
    r = simulate(TINY, wl, seed=3, block_table=table, log=lambda *a: None, **scales)
    assert r.failures() == []
    assert r.cycles == r.predicted_cycles
    assert [list(x) for x in r.schedule.block_table.rows] == table


@pytest.mark.parametrize("text, match", [
    ("[[5, 2, 9], [2, 0], [0.7]]", r"block_table\[2\]\[0\]=0.7 is invalid: must be an integer"),
    ("[[5, 2, 9], [2, 0]]", r"block_table='2 rows' is invalid: one per sequence: 3"),
    ("[[5, 2], [2, 0], [7]]", r"block_table\[0\]='2 pages' is invalid: sequence 0 has 37 keys"),
    ("[[5, 2, -1], [2, 0], [7]]", r"block_table\[0\]\[2\]=-1 is invalid: sequence 0 needs page 2"),
    ("{\"a\": 1}", r"a JSON list of lists"),
])
def test_bad_tables_are_one_line_and_exit_2(tmp_path, text, match):
    import re

    path = tmp_path / "T.json"
    path.write_text(text)
    res = CliRunner().invoke(main, ["schedule", "--preset", "tiny", "--decode", "--cache-lens",
                                    "37,20,5", "--page-size", "16", "--d", "16",
                                    "--block-table", str(path)])
    assert res.exit_code == 2, res.output
    assert re.search(match, res.output), res.output
    assert "Traceback" not in res.output


def test_a_npy_table_reads_as_json_does(tmp_path):
    import numpy as np

    np.save(tmp_path / "T.npy", np.array(TABLE))
    out = tmp_path / "s.json"
    res = CliRunner().invoke(main, ["schedule", "--preset", "tiny", "--decode", "--cache-lens",
                                    "37,20,5", "--page-size", "16", "--d", "16",
                                    "--block-table", str(tmp_path / "T.npy"), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["block_table"] == TABLE
    res = CliRunner().invoke(main, ["schedule", "--preset", "tiny", "--decode", "--cache-lens",
                                    "37", "--d", "16", "--block-table", str(tmp_path / "T.npy")])
    assert res.exit_code == 2 and "without --page-size" in res.output, res.output
