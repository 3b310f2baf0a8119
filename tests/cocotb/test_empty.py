"""Empty sequences on the RTL (issue #48 item 3): a decode batch with an empty cache and varlen
batches with query-less and key-less sequences, bit-exact (rows of 0, statistics words of a row
that saw no key) and cycle-exact, with no K, V or table byte read for an empty cache."""

import pytest
from click.testing import CliRunner

from attenio.app.cli import main
from attenio.base import config as C
from attenio.verify.runner import simulate

TINY = C.tiny()


def test_the_issue_case_passes():
    res = CliRunner().invoke(main, ["simulate", "--preset", "tiny", "--decode", "--cache-lens",
                                    "0,37", "--page-size", "16", "--d", "16"])
    assert res.exit_code == 0 and "result               PASS" in res.output, res.output


@pytest.mark.parametrize("shape, table, scales", [
    # causal GQA prefill: a sequence with no keys, one with no queries, lse words
    ({"seqlens_q": [3, 0, 8], "seqlens_k": [0, 7, 12], "head_dim": 8, "heads": 4,
      "kv_heads": 2, "causal": True, "lse": True, "page_size": 4},
     [[-1, -1, -1], [2, 4, -1], [0, 5, 1]], {"q_rows": True, "k_block": 4}),
    # contiguous K/V, a window
    ({"seqlens_q": [0, 20, 5], "seqlens_k": [9, 0, 5], "head_dim": 16, "causal": True,
      "window_left": 3, "lse": True}, None, {}),
])
def test_empty_sequences_bit_exact_and_cycle_exact(shape, table, scales):
    wl = C.VarlenWorkload(**shape)
    r = simulate(TINY, wl, seed=9, block_table=table, log=lambda *a: None, **scales)
    assert r.failures() == []
    assert r.cycles == r.predicted_cycles
