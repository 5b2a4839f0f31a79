"""Wordpiece -> unit pooling against hand-computed values."""

import numpy as np
import pytest

from spacy_pairatt.alignment import (
    align_token_groups,
    align_units,
    pool_attention,
    pool_hidden,
    pool_hidden_backward,
)


def ragged(token_wordpieces):
    lengths = np.array([len(w) for w in token_wordpieces])
    indices = np.array([i for w in token_wordpieces for i in w], dtype="int64")
    return lengths, indices


@pytest.fixture
def one_window():
    """[CLS] i don ' t [SEP]: "I" -> 1, "do" -> 2, "n't" -> 2,3,4 (shares "don"), "  " -> none."""
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(1, 6, 3)).astype("float32")
    attention = rng.dirichlet(np.ones(6), size=(1, 1, 6)).astype("float32")  # (W=1, H=1, P, P)
    lengths, indices = ragged([[1], [2], [2, 3, 4], []])
    return hidden, attention, align_units(lengths, indices, 6, 0, 4)


def test_hidden_is_mean_of_wordpieces(one_window):
    hidden, _, alignment = one_window
    units = pool_hidden(hidden, alignment)
    assert units.shape == (5, 3)
    np.testing.assert_allclose(units[0], hidden[0, 0], rtol=1e-6)  # root = [CLS]
    np.testing.assert_allclose(units[1], hidden[0, 1], rtol=1e-6)
    np.testing.assert_allclose(units[2], hidden[0, 2], rtol=1e-6)
    np.testing.assert_allclose(units[3], hidden[0, 2:5].mean(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(units[4], 0)
    assert alignment.has_wordpieces.tolist() == [True, True, True, True, False]


def test_attention_from_is_mean_to_is_sum(one_window):
    _, attention, alignment = one_window
    a = attention[0, 0]
    words, shared = pool_attention([attention], alignment)
    assert words.shape == (1, 5, 5)
    # "n't" (unit 3, rows 2,3,4) attends to "I" (unit 1, column 1): mean over its rows
    assert words[0, 3, 1] == pytest.approx(a[2:5, 1].mean(), rel=1e-5)
    # "I" attends to "n't": sum over its columns 2,3,4
    assert words[0, 1, 3] == pytest.approx(a[1, 2:5].sum(), rel=1e-5)
    # "do" and "n't" share "don"
    assert words[0, 2, 3] == pytest.approx(a[2, 2:5].sum(), rel=1e-5)
    assert words[0, 3, 2] == pytest.approx(a[2:5, 2].mean(), rel=1e-5)
    # root is [CLS]
    assert words[0, 0, 1] == pytest.approx(a[0, 1], rel=1e-5)
    # the whitespace token has no attention and shares no window
    np.testing.assert_array_equal(words[0, 4], 0)
    np.testing.assert_array_equal(words[0, :, 4], 0)
    assert shared[4].tolist() == [0, 0, 0, 0, 0]
    assert shared[:4, :4].min() == 1
    # "don" is counted for both "do" and "n't", so the row of "I" exceeds its wordpiece mass by a[1, 2]
    assert words[0, 1].sum() == pytest.approx(a[1].sum() - a[1, 5] + a[1, 2], rel=1e-5)


def test_two_windows_average_shared_and_zero_unshared():
    """Windows of P=4: w0 = [CLS] a b [SEP] (flat 0..3), w1 = [CLS] b c [SEP] (flat 4..7).

    Token "a" is only in w0, "b" in both (positions 2 and 5), "c" only in w1.
    """
    rng = np.random.default_rng(1)
    hidden = rng.normal(size=(2, 4, 3)).astype("float32")
    attention = [rng.dirichlet(np.ones(4), size=(2, 2, 4)).astype("float32") for _ in range(2)]  # L=2, H=2
    lengths, indices = ragged([[1], [2, 5], [6]])
    alignment = align_units(lengths, indices, 4, 0, 3)
    assert alignment.windows.tolist() == [0, 1]
    units = pool_hidden(hidden, alignment)
    np.testing.assert_allclose(units[0], (hidden[0, 0] + hidden[1, 0]) / 2, rtol=1e-6)
    np.testing.assert_allclose(units[2], (hidden[0, 2] + hidden[1, 1]) / 2, rtol=1e-6)
    words, shared = pool_attention(attention, alignment)
    assert words.shape == (4, 4, 4)
    assert shared[1, 3] == 0 and shared[1, 2] == 1 and shared[2, 3] == 1 and shared[0, 2] == 2
    for layer in range(2):
        for head in range(2):
            f = layer * 2 + head
            w0, w1 = attention[layer][0, head], attention[layer][1, head]
            assert words[f, 1, 3] == 0 and words[f, 3, 1] == 0  # "a" and "c" share no window
            assert words[f, 1, 2] == pytest.approx(w0[1, 2], rel=1e-5)  # "a" -> "b" only in w0
            assert words[f, 3, 2] == pytest.approx(w1[2, 1], rel=1e-5)  # "c" -> "b" only in w1
            assert words[f, 0, 2] == pytest.approx((w0[0, 2] + w1[0, 1]) / 2, rel=1e-5)  # averaged
            assert words[f, 2, 0] == pytest.approx((w0[2, 0] + w1[1, 0]) / 2, rel=1e-5)


def test_sentence_slice_of_a_longer_doc():
    lengths, indices = ragged([[1], [2], [5], [6, 7]])
    alignment = align_units(lengths, indices, 4, 2, 4)  # tokens 2 and 3 only, both in window 1
    assert alignment.windows.tolist() == [1]
    assert alignment.membership.shape == (3, 1, 4)
    assert np.argwhere(alignment.membership[0, 0]).ravel().tolist() == [0]
    assert np.argwhere(alignment.membership[2, 0]).ravel().tolist() == [2, 3]
    with pytest.raises(ValueError, match="outside the alignment"):
        align_units(lengths, indices, 4, 2, 9)


def test_hidden_backward_is_the_adjoint():
    rng = np.random.default_rng(2)
    hidden = rng.normal(size=(3, 5, 4))
    lengths, indices = ragged([[1, 2], [2, 6], [], [7, 11, 12]])
    alignment = align_units(lengths, indices, 5, 0, 4)
    d_units = rng.normal(size=(5, 4))
    d_hidden = pool_hidden_backward(d_units, alignment, hidden.shape)
    assert np.sum(d_units * pool_hidden(hidden, alignment)) == pytest.approx(np.sum(d_hidden * hidden))


def test_entity_with_two_mentions_pools_over_all_their_wordpieces():
    """Relation units: an entity is all wordpieces of all its mentions (mean as source, sum as target)."""
    rng = np.random.default_rng(1)
    hidden = rng.normal(size=(1, 8, 3)).astype("float32")
    attention = rng.dirichlet(np.ones(8), size=(1, 2, 8)).astype("float32")  # (W=1, H=2, P, P)
    # tokens 0..4 -> wordpieces [1], [2, 3], [4], [5], [6]; entity A = tokens 0 and 3 (two mentions),
    # entity B = token 1 (two wordpieces), token 2 and 4 belong to no entity.
    lengths, indices = ragged([[1], [2, 3], [4], [5], [6]])
    alignment = align_token_groups(lengths, indices, 8, np.array([0, 3, 1]), np.array([1, 1, 2]))
    units = pool_hidden(hidden, alignment)
    np.testing.assert_allclose(units[1], hidden[0, [1, 5]].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(units[2], hidden[0, [2, 3]].mean(axis=0), rtol=1e-6)
    words, _ = pool_attention([attention], alignment)
    for head in range(2):
        a = attention[0, head]
        assert words[head, 1, 2] == pytest.approx(a[[1, 5]][:, [2, 3]].sum(axis=1).mean(), rel=1e-5)
        assert words[head, 2, 1] == pytest.approx(a[[2, 3]][:, [1, 5]].sum(axis=1).mean(), rel=1e-5)
