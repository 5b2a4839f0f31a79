"""Tests for spacy_pairatt.core.decoding (tree decoders over arc score matrices)."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from spacy_pairatt.core.decoding import (
    decode_batch,
    decode_heads,
    greedy_heads,
    is_single_rooted_tree,
    mst_heads,
    tree_score,
)


# --------------------------------------------------------------------------
# Independent brute-force reference (no code shared with the module).
# --------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def all_single_rooted_trees(n: int) -> np.ndarray:
    """Every single-rooted tree over n words as a (T, n) array of heads of words 1..n.

    Enumerates all n**n self-loop-free head assignments with numpy and keeps
    those with one root child in which every word reaches 0 within n steps.
    """
    choices = [[h for h in range(n + 1) if h != word] for word in range(1, n + 1)]
    grids = np.meshgrid(*choices, indexing="ij")
    cand = np.stack([g.ravel() for g in grids], axis=1)
    parents = np.concatenate([np.zeros((cand.shape[0], 1), dtype=cand.dtype), cand], axis=1)
    rows = np.arange(cand.shape[0])[:, None]
    position = np.broadcast_to(np.arange(n + 1), parents.shape)
    for _ in range(n):
        position = parents[rows, position]
    keep = ((cand == 0).sum(axis=1) == 1) & (position == 0).all(axis=1)
    return cand[keep]


def brute_force_best_score(scores: np.ndarray) -> float:
    n = scores.shape[0] - 1
    trees = all_single_rooted_trees(n)
    return float(scores[np.arange(1, n + 1), trees].sum(axis=1).max())


def with_root(word_heads) -> np.ndarray:
    return np.concatenate([[-1], np.asarray(word_heads)]).astype(np.int64)


def random_scores(rng: np.random.Generator, n: int, integer: bool) -> np.ndarray:
    """Gaussian scores, or small integers (many ties) when ``integer``."""
    if integer:
        return rng.integers(-3, 4, size=(n + 1, n + 1)).astype(float)
    return rng.normal(scale=3.0, size=(n + 1, n + 1))


def is_projective(heads: np.ndarray) -> bool:
    arcs = [tuple(sorted((int(h), d))) for d, h in enumerate(heads) if d > 0]
    return not any(a < c < b < d for (a, b), (c, d) in itertools.permutations(arcs, 2))


# --------------------------------------------------------------------------
# The reference itself, and is_single_rooted_tree against it.
# --------------------------------------------------------------------------
@pytest.mark.parametrize("n", range(1, 8))
def test_enumerator_finds_cayley_number_of_trees(n):
    # Rooted labelled trees on n nodes: n ** (n - 1).
    assert len(all_single_rooted_trees(n)) == n ** (n - 1)


@pytest.mark.parametrize("n", range(1, 5))
def test_is_single_rooted_tree_agrees_with_enumeration(n):
    expected = {tuple(t) for t in all_single_rooted_trees(n).tolist()}
    found = {
        assignment
        for assignment in itertools.product(range(n + 1), repeat=n)
        if is_single_rooted_tree(with_root(assignment))
    }
    assert found == expected


# --------------------------------------------------------------------------
# MST optimality.
# --------------------------------------------------------------------------
@pytest.mark.parametrize("n", range(1, 8))
@pytest.mark.parametrize("seed", range(6))
def test_mst_matches_brute_force(n, seed):
    rng = np.random.default_rng(1000 * n + seed)
    scores = random_scores(rng, n, integer=seed % 2 == 1)
    heads = mst_heads(scores)
    assert heads.dtype == np.int64
    assert heads.shape == (n + 1,)
    assert heads[0] == -1
    assert is_single_rooted_tree(heads)
    assert np.isclose(tree_score(scores, heads), brute_force_best_score(scores))


@pytest.mark.parametrize("n", range(2, 8))
@pytest.mark.parametrize("seed", range(4))
def test_mst_with_disallowed_arcs_matches_brute_force(n, seed):
    rng = np.random.default_rng(7000 + 100 * n + seed)
    scores = random_scores(rng, n, integer=False)
    scores[rng.random(scores.shape) < 0.4] = -np.inf
    best = brute_force_best_score(scores)
    if np.isneginf(best):
        with pytest.raises(ValueError, match="no .*tree exists"):
            mst_heads(scores)
        return
    heads = mst_heads(scores)
    assert is_single_rooted_tree(heads)
    assert np.isfinite(scores[np.arange(1, n + 1), heads[1:]]).all()
    assert np.isclose(tree_score(scores, heads), best)


def test_mst_beats_every_single_head_change_on_larger_sentences():
    # Necessary condition for optimality where brute force is out of reach.
    rng = np.random.default_rng(42)
    for n in (25, 40):
        scores = rng.normal(size=(n + 1, n + 1))
        heads = mst_heads(scores)
        assert is_single_rooted_tree(heads)
        best = tree_score(scores, heads)
        for word, head in itertools.product(range(1, n + 1), range(n + 1)):
            changed = heads.copy()
            changed[word] = head
            if is_single_rooted_tree(changed):
                assert tree_score(scores, changed) <= best + 1e-9


def test_single_root_is_enforced():
    # Both words prefer ROOT: the unconstrained optimum (score 20) has two
    # root children; the single-root optimum is 10 + 0.
    scores = np.array(
        [
            [0.0, 0.0, 0.0],
            [10.0, 0.0, 0.0],
            [10.0, 0.0, 0.0],
        ]
    )
    assert np.count_nonzero(greedy_heads(scores)[1:] == 0) == 2
    heads = mst_heads(scores)
    assert np.count_nonzero(heads[1:] == 0) == 1
    assert is_single_rooted_tree(heads)
    assert tree_score(scores, heads) == pytest.approx(10.0)


def test_greedy_cycle_is_broken_by_mst():
    # Words 1 and 2 prefer each other (a 2-cycle); word 3 prefers word 1.
    scores = np.full((4, 4), -5.0)
    scores[1, 2] = scores[2, 1] = 10.0
    scores[3, 1] = 8.0
    scores[1, 0] = 1.0
    scores[2, 0] = 3.0
    greedy = greedy_heads(scores)
    assert greedy[1] == 2 and greedy[2] == 1
    assert not is_single_rooted_tree(greedy)
    heads = mst_heads(scores)
    assert is_single_rooted_tree(heads)
    assert heads.tolist() == [-1, 2, 0, 1]
    assert tree_score(scores, heads) == pytest.approx(brute_force_best_score(scores))
    assert tree_score(scores, heads) == pytest.approx(21.0)


def test_non_projective_optimum_is_found():
    # Arcs 0->2, 3->1 and 2->3: arc (0, 2) crosses arc (1, 3).
    expected = with_root([3, 0, 2])
    assert not is_projective(expected)
    scores = np.zeros((4, 4))
    scores[np.arange(1, 4), expected[1:]] = 10.0
    heads = mst_heads(scores)
    assert heads.tolist() == expected.tolist()
    assert not is_projective(heads)


def test_minus_inf_forces_structure():
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(5, 5))
    scores[:, 0] = -np.inf
    scores[3, 0] = -10.0  # only word 3 may attach to ROOT, and cheaply
    scores[1, 2] = -np.inf
    heads = mst_heads(scores)
    assert heads[3] == 0
    assert heads[1] != 2
    assert is_single_rooted_tree(heads)
    assert np.isclose(tree_score(scores, heads), brute_force_best_score(scores))


def test_no_root_arc_raises():
    scores = np.zeros((3, 3))
    scores[:, 0] = -np.inf
    with pytest.raises(ValueError, match="no .*tree exists"):
        mst_heads(scores)


def test_only_multi_root_trees_raises():
    scores = np.zeros((3, 3))
    scores[1, 2] = scores[2, 1] = -np.inf
    with pytest.raises(ValueError, match="no single-rooted tree"):
        mst_heads(scores)


def test_all_arcs_disallowed_raises():
    with pytest.raises(ValueError, match="no single-rooted tree"):
        mst_heads(np.full((4, 4), -np.inf))


def test_empty_and_single_word():
    assert mst_heads(np.zeros((1, 1))).tolist() == [-1]
    assert greedy_heads(np.zeros((1, 1))).tolist() == [-1]
    assert mst_heads(np.array([[0.0, 0.0], [-3.0, 7.0]])).tolist() == [-1, 0]
    assert tree_score(np.zeros((1, 1)), np.array([-1])) == 0.0


def test_input_is_not_modified():
    rng = np.random.default_rng(5)
    scores = rng.normal(size=(9, 9))
    scores[2, 0] = -np.inf
    original = scores.copy()
    mst_heads(scores)
    greedy_heads(scores)
    np.testing.assert_array_equal(scores, original)


def test_ignored_entries_do_not_matter():
    rng = np.random.default_rng(11)
    scores = rng.normal(size=(6, 6))
    noisy = scores.copy()
    noisy[0, :] = 1e6
    np.fill_diagonal(noisy, 1e6)
    assert mst_heads(noisy).tolist() == mst_heads(scores).tolist()
    assert greedy_heads(noisy).tolist() == greedy_heads(scores).tolist()


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((2, 3)),
        np.zeros(3),
        np.zeros((2, 2, 2)),
        np.zeros((0, 0)),
    ],
)
@pytest.mark.parametrize("decoder", [mst_heads, greedy_heads])
def test_non_square_raises(bad, decoder):
    with pytest.raises(ValueError, match="square"):
        decoder(bad)


@pytest.mark.parametrize("decoder", [mst_heads, greedy_heads])
def test_nan_and_positive_inf_raise(decoder):
    scores = np.zeros((4, 4))
    scores[2, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        decoder(scores)
    scores[2, 3] = np.inf
    with pytest.raises(ValueError, match=r"\+inf"):
        decoder(scores)


# --------------------------------------------------------------------------
# Greedy decoding and dispatch.
# --------------------------------------------------------------------------
def test_greedy_is_row_argmax_ignoring_diagonal():
    rng = np.random.default_rng(9)
    n = 12
    scores = rng.normal(size=(n + 1, n + 1))
    np.fill_diagonal(scores, 100.0)
    heads = greedy_heads(scores)
    assert heads[0] == -1
    for word in range(1, n + 1):
        candidates = [h for h in range(n + 1) if h != word]
        assert heads[word] == max(candidates, key=lambda h: scores[word, h])


def test_decode_heads_dispatches():
    rng = np.random.default_rng(21)
    scores = rng.normal(size=(8, 8))
    assert decode_heads(scores, "mst").tolist() == mst_heads(scores).tolist()
    assert decode_heads(scores, "greedy").tolist() == greedy_heads(scores).tolist()


def test_decode_heads_unknown_method():
    with pytest.raises(ValueError, match="'eisner'.*'greedy'.*'mst'"):
        decode_heads(np.zeros((3, 3)), "eisner")


# --------------------------------------------------------------------------
# is_single_rooted_tree and tree_score.
# --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "word_heads",
    [[0], [0, 1], [2, 0], [0, 1, 1], [3, 3, 0, 2], [2, 0, 4, 2]],
)
def test_is_single_rooted_tree_accepts_trees(word_heads):
    assert is_single_rooted_tree(with_root(word_heads))


@pytest.mark.parametrize(
    "heads, why",
    [
        (with_root([2, 1]), "cycle without root"),
        (with_root([0, 3, 2]), "cycle beside the rooted part"),
        (with_root([0, 0]), "two roots"),
        (with_root([0, 5]), "head out of range"),
        (with_root([0, -1]), "negative head"),
        (with_root([0, 2]), "self loop"),
        (with_root([1]), "self loop on the only word"),
        (np.array([-1.0, 0.0]), "not integer"),
        (np.zeros((2, 2), dtype=int), "not 1-D"),
        (np.array([], dtype=int), "no root slot"),
    ],
)
def test_is_single_rooted_tree_rejects(heads, why):
    assert not is_single_rooted_tree(heads), why


def test_empty_sentence_counts_as_tree():
    assert is_single_rooted_tree(np.array([-1]))


def test_tree_score_sums_chosen_arcs():
    scores = np.arange(16, dtype=float).reshape(4, 4)
    heads = with_root([0, 1, 1])
    assert tree_score(scores, heads) == scores[1, 0] + scores[2, 1] + scores[3, 1]


# --------------------------------------------------------------------------
# Property tests.
# --------------------------------------------------------------------------
@st.composite
def scores_and_random_tree(draw):
    n = draw(st.integers(1, 12))
    scores = draw(arrays(np.float64, (n + 1, n + 1), elements=st.floats(-50, 50, allow_nan=False)))
    # Random tree: attach words in a random order, each to an earlier one.
    order = draw(st.permutations(range(1, n + 1)))
    tree = np.full(n + 1, -1, dtype=np.int64)
    tree[order[0]] = 0
    for k in range(1, n):
        tree[order[k]] = order[draw(st.integers(0, k - 1))]
    return scores, tree


@settings(max_examples=200, deadline=None)
@given(scores_and_random_tree())
def test_mst_property(case):
    scores, random_tree = case
    n = scores.shape[0] - 1
    assert is_single_rooted_tree(random_tree)
    chain = np.arange(-1, n, dtype=np.int64)  # 0 -> 1 -> 2 -> ... -> n
    assert is_single_rooted_tree(chain)
    heads = mst_heads(scores)
    assert is_single_rooted_tree(heads)
    best = tree_score(scores, heads)
    tolerance = 1e-9 * (1 + np.abs(scores).sum())
    assert best >= tree_score(scores, chain) - tolerance
    assert best >= tree_score(scores, random_tree) - tolerance
    # Greedy maximises every row independently: an upper bound on any tree.
    assert tree_score(scores, greedy_heads(scores)) >= best - tolerance


def test_mst_handles_long_sentences():
    rng = np.random.default_rng(600)
    scores = rng.normal(size=(601, 601))
    heads = mst_heads(scores)
    assert is_single_rooted_tree(heads)
    assert tree_score(scores, heads) >= tree_score(scores, np.arange(-1, 600))


def test_a_greedy_tree_is_returned_as_the_mst():
    """When every word's best head already forms a single-rooted tree, MST returns it unchanged."""
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(7, 7))
    tree = np.array([0, 2, 0, 2, 3, 3, 1])  # word 2 is the root child
    scores[np.arange(1, 7), tree[1:]] += 10.0
    heads = mst_heads(scores)
    assert heads[1:].tolist() == tree[1:].tolist()
    assert tree_score(scores, heads) == pytest.approx(brute_force_best_score(scores))


@pytest.mark.parametrize("method", ["mst", "greedy"])
def test_decode_batch_equals_decoding_each_sentence(method):
    """One compiled call over a padded batch gives each sentence the tree decode_heads gives it;
    what lies in the padding does not matter."""
    rng = np.random.default_rng(7)
    lengths = np.array([1, 6, 3, 0, 9, 2])
    arcs = rng.normal(scale=3.0, size=(len(lengths), 10, 10))
    arcs[1, :, 0] = 5.0  # every word prefers the root: the MST must pick one
    heads = decode_batch(arcs, lengths, method)
    for b, n in enumerate(lengths):
        np.testing.assert_array_equal(heads[b, : n + 1], decode_heads(arcs[b, : n + 1, : n + 1], method))
        assert (heads[b, n + 1 :] == -1).all()
    noisy = arcs.copy()
    noisy[0, 5:, :] = np.nan
    np.testing.assert_array_equal(decode_batch(noisy, lengths, method)[0], heads[0])
    with pytest.raises(ValueError, match="unknown decoding method"):
        decode_batch(arcs, lengths, "eisner")
    with pytest.raises(ValueError, match="every length < N"):
        decode_batch(arcs, lengths + 5, method)
