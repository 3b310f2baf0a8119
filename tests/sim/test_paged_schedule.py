"""Paged K/V caches on the schedule generator: the block-table walk's order, the program's
size against the page count, the bytes read (the pages' K/V plus the table words), the
fields' checks and the workload's and layout's validation."""

import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.contract.isa import Op, field_error
from attenio.contract.rules import ENTRY_BYTES, PAGE_ALIGN_LOG2, PageWalk
from attenio.sim.layout import Layout
from attenio.sim.schedule import schedule

TINY = C.tiny()


def decode_batch(page_size, lens=(37, 100, 64, 5), **kw):
    return C.VarlenWorkload.from_options(TINY, seqlens=[1] * len(lens), nk=list(lens), d=8,
                                         heads=4, kv_heads=2, page_size=page_size, **kw)


@pytest.mark.parametrize("table, keys, page_log2, beat", [
    (0, 100, 2, 16), (12, 100, 2, 16), (8, 3, 0, 16), (4, 64, 4, 4), (60, 1000, 3, 64)])
def test_walk_reads_each_word_once_before_it_is_needed_and_one_ahead(table, keys, page_log2,
                                                                      beat):
    w = PageWalk(table, keys, page_log2, beat)
    requested = []
    for first in range(0, keys, 1 << page_log2):       # K blocks that start pages
        requested += w.words_before(first)
        g = first >> page_log2
        j, _ = w.entry(g)
        assert j in requested                         # its word was asked for first
        assert max(requested) <= j + 1                # two words buffered: never further
    assert requested == list(range(w.words))          # each word once, in order
    assert w.words == -(-(table % beat // ENTRY_BYTES + w.pages) // (beat // ENTRY_BYTES))


def test_paged_fields_are_checked():
    f = {"keys": 10, "d": 8, "keys_per_step": 4, "paged": 1, "page_log2": 1, "table": 0,
         "k_addr": 0, "v_addr": 0, "row_stride": 8, "key_scales": 0}
    assert "page of 2 keys" in field_error(Op.LOAD_KV, f, TINY)
    assert "entry size" in field_error(Op.LOAD_KV, {**f, "page_log2": 2, "table": 6}, TINY)
    assert field_error(Op.LOAD_KV, {**f, "page_log2": 2}, TINY) is None


@pytest.mark.parametrize("bad", [3, -4, 1 << 16, True])
def test_page_size_is_validated(bad):
    with pytest.raises(ConfigError, match="page_size"):
        decode_batch(bad)


def test_program_size_does_not_grow_with_the_pages():
    lens = [1] * 4
    sizes = {p: len(schedule(TINY, C.VarlenWorkload.from_options(
        TINY, seqlens=lens, nk=[1000, 2000, 3000, 4000], d=8, heads=4, kv_heads=1,
        page_size=p), keep_spans=False).program) for p in (1, 4, 64)}
    assert len(set(sizes.values())) == 1, sizes


def test_bytes_read_are_the_pages_plus_the_table_words():
    paged, flat = schedule(TINY, decode_batch(4), keep_spans=False), \
        schedule(TINY, decode_batch(0), keep_spans=False)
    words = sum(PageWalk(i.table, i.keys, i.page_log2, TINY.axi_data_bytes).words
                for i in paged.program if i.op == Op.LOAD_KV)
    assert paged.read_bytes == flat.read_bytes + words * TINY.axi_data_bytes
    # the walk hides behind the pages: at most a few percent more cycles on this small batch
    assert paged.total_cycles <= 1.05 * flat.total_cycles


def test_memo_is_exact_for_paged_tiles():
    wl = decode_batch(4, lens=(37, 100, 64, 37, 100, 64))
    assert schedule(TINY, wl).total_cycles == schedule(TINY, wl, keep_spans=False).total_cycles


def test_windowed_tiles_start_at_a_page():
    wl = C.Workload(seq_q=100, seq_k=100, head_dim=8, causal=True, window_left=10,
                    page_size=8)
    s = schedule(TINY, wl, keep_spans=False)
    lay = Layout.packed(TINY, wl, len(s.program) * 32)
    kvs = [i for i in s.program if i.op == Op.LOAD_KV]
    assert len(kvs) > 1
    for kv in kvs:
        page = (kv.table - lay.tables) // ENTRY_BYTES
        entry = lay.entries(kv.table, 1)[0]
        assert entry << PAGE_ALIGN_LOG2 == lay.k + lay.paged.slots[0][page] * lay.paged.pitch


def test_block_tables_place_the_pages_and_are_validated():
    # the caller's table lies as given: row i at i · width entries, −1 (and a row's entries
    # past its sequence's pages) kept; only the pages a sequence touches are its slots
    wl = decode_batch(4, lens=(8, 5))
    lay = Layout.packed(TINY, wl, 0, block_table=[[7, 2], [0, 3, 9]])
    assert lay.paged.slots == ((7, 2), (0, 3))
    assert lay.paged.table_start == (0, 3) and lay.paged.n_slots == 10
    addr = [(lay.k + s * lay.paged.pitch) >> PAGE_ALIGN_LOG2 for s in (7, 2, 0, 3, 9)]
    assert lay.entries(lay.tables, 6) == addr[:2] + [0xFFFF_FFFF] + addr[2:]
    with pytest.raises(ConfigError, match=r"block_table\[1\]=.*sequence 1 has 5 keys"):
        Layout.packed(TINY, wl, 0, block_table=[[7, 2], [0]])
    with pytest.raises(ConfigError, match=r"block_table\[0\]\[1\]=-1.*needs page 1"):
        Layout.packed(TINY, wl, 0, block_table=[[7, -1], [0, 1]])
    with pytest.raises(ConfigError, match=r"block_table='1 rows'.*one per sequence: 2"):
        Layout.packed(TINY, wl, 0, block_table=[[7, 2]])
    with pytest.raises(ConfigError, match=r"block_table\[0\]\[1\]=0.7.*integer"):
        Layout.packed(TINY, wl, 0, block_table=[[7, 0.7], [0, 1]])


@pytest.mark.parametrize("hw", [C.tiny(), C.fpga(), C.asplos26()], ids=["tiny", "fpga", "asplos26"])
@pytest.mark.parametrize("shape", [
    {"seqlens_q": [1, 1, 1], "seqlens_k": [37, 700, 64], "heads": 4, "kv_heads": 2},
    {"seqlens_q": [30, 5, 64], "seqlens_k": [30, 50, 64], "heads": 2, "kv_heads": 1,
     "causal": True, "window_left": 7},
    {"seqlens_q": [300, 17], "seqlens_k": [300, 400], "causal": True},
])
def test_closed_form_counts_pages_and_table_words(hw, shape):
    wl = C.VarlenWorkload(head_dim=32, page_size=8, **shape)
    s = schedule(hw, wl, keep_spans=False)
    assert s.read_bytes == s.traffic.read_bytes


def test_closed_form_of_a_paged_batch():
    wl = C.Workload(seq_q=40, seq_k=90, head_dim=8, batch=3, causal=True, window_left=20,
                    page_size=4)
    s = schedule(TINY, wl, keep_spans=False)
    assert s.read_bytes == s.traffic.read_bytes


@pytest.mark.parametrize("lens, page, bits", [((3000, 1500, 40), 16, 16),
                                               ((5000, 700), 64, 16),
                                               # many table words, the tail past the last
                                               # one's first page; 8-bit, K factors packed
                                               ((9000, 6100, 513), 16, 8)])
def test_steady_state_skip_is_exact_for_paged_tiles(monkeypatch, lens, page, bits):
    from attenio.sim import tile_loop
    from attenio.sim.plan import default_scale

    hw = C.replace(C.asplos26(), data_bits=bits)   # page slots alike in their 4 KB lines
    wl = C.VarlenWorkload.from_options(hw, seqlens=[1] * len(lens), nk=list(lens), d=128,
                                       heads=8, kv_heads=2, page_size=page)
    sp = default_scale(hw, wl, q_rows=bits == 8, key_scales=bits == 8)
    fast = schedule(hw, wl, scale=sp)
    monkeypatch.setattr(tile_loop, "STEADY_STATE_SKIP", False)
    slow = schedule(hw, wl, scale=sp)
    assert (fast.total_cycles, fast.read_bytes, fast.busy, fast.stalls) == \
        (slow.total_cycles, slow.read_bytes, slow.busy, slow.stalls)


def test_dataflows_that_cannot_page_say_so():
    wl = C.Workload(seq_q=64, seq_k=64, head_dim=8, page_size=4)
    for flow in ("flat", "standard"):
        with pytest.raises(ConfigError, match="paged K/V caches run on the dataflows"):
            schedule(TINY, wl, flow)
    with pytest.raises(ConfigError, match="pages must hold at least one block"):
        schedule(C.asplos26(), C.Workload(seq_q=4096, seq_k=4096, head_dim=128, page_size=16),
                 "fa2")
