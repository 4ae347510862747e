# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/serving.py's pieces that decide what is compared: the teacher's windows cover each document once,
and window embeddings are averaged per document by tokens (a numbers check, not a timing)."""

import numpy as np

from benchmarks.serving import pool, windows


def test_windows_cover_each_document_once_with_its_own_specials():
    ids = np.array([[101, *range(1000, 1000 + 1100), 102], [101, *range(5000, 5000 + 1100), 102]])
    parts, mask, owners = windows(ids)
    assert parts.shape == (6, 512) and list(owners) == [0, 0, 0, 1, 1, 1]  # 510 + 510 + 80 body tokens each
    for row in range(2):
        body = np.concatenate([p[m == 1][1:-1] for p, m in zip(parts[owners == row], mask[owners == row])])
        assert np.array_equal(body, ids[row, 1:-1])
    assert all(p[0] == 101 and p[m == 1][-1] == 102 for p, m in zip(parts, mask))


def test_pooling_averages_windows_by_tokens():
    hidden = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [9.0, 9.0]]])
    mask = np.array([[1, 1], [1, 0]])  # window 0: two tokens along x; window 1: one token along y
    embedding = pool(hidden, mask, owners=np.array([0, 0]), rows=1)
    np.testing.assert_allclose(embedding[0], np.array([2.0, 1.0]) / np.sqrt(5.0))
    assert pool(hidden[:1], mask[:1]).shape == (1, 2)
