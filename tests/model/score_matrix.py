"""The mask of a workload as a full boolean matrix, written out for the tests that check the
streamed float64 reference against a score-matrix formulation of their own."""

import numpy as np


def visible_matrix(wl):
    """``[seq_q, seq_k]``: row i sees key j under ``wl``'s causal mask and window, aligned at
    the bottom right (``diag = seq_k − seq_q``); and the distance ``|i + diag − j|``."""
    rows, keys = np.arange(wl.seq_q)[:, None], np.arange(wl.seq_k)[None, :]
    diag = wl.seq_k - wl.seq_q
    seen = np.ones((wl.seq_q, wl.seq_k), dtype=bool)
    if wl.causal:
        seen &= keys <= rows + diag
    if wl.window_left >= 0:
        seen &= keys >= rows + diag - wl.window_left
    if wl.window_right >= 0:
        seen &= keys <= rows + diag + wl.window_right
    return seen, np.abs(rows + diag - keys)
