"""Tree marginals and the tree-CRF loss against brute force over every single-root tree."""

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from spacy_pairatt import tree_marginals
from spacy_pairatt.core.layout import NEG_INF
from spacy_pairatt.core.marginals import (
    CONDITION_LIMIT,
    LOG_FLOOR,
    _eliminated_log_det,
    _eliminated_marginals,
    _lu_marginals,
    _shifted_laplacian,
    decoded_tree_confidence,
    diagonal_to_root_first,
    log_partition,
    root_first_to_diagonal,
    tree_marginals_with_log_partition,
)
from spacy_pairatt.core.objectives import biaffine_loss, gold_tree_rows, tree_crf_arc_loss


def single_root_trees(n: int) -> np.ndarray:
    """Every head assignment of n words (heads[i] == i: the root) that is one tree with one root."""
    assignments = np.array(list(itertools.product(range(n), repeat=n)), dtype=np.int64).reshape(-1, n)
    words = np.arange(n)
    one_root = (assignments == words).sum(axis=1) == 1
    node = np.broadcast_to(words, assignments.shape).copy()
    for _ in range(n):  # follow heads n times: every word of a tree has reached the root by then
        node = np.take_along_axis(assignments, node, axis=1)
    reaches_root = (np.take_along_axis(assignments, node, axis=1) == node).all(axis=1)
    return assignments[one_root & reaches_root]


def brute_force(scores: np.ndarray):
    """(marginals, log Z) by enumerating all single-root trees."""
    n = len(scores)
    trees = single_root_trees(n)
    tree_scores = scores[np.arange(n), trees].sum(axis=1)
    log_z = logsumexp(tree_scores)
    marginals = np.zeros((n, n))
    for tree, probability in zip(trees, np.exp(tree_scores - log_z)):
        marginals[np.arange(n), tree] += probability
    return marginals, log_z


def test_tree_count_is_cayleys():
    assert [len(single_root_trees(n)) for n in range(1, 6)] == [n ** (n - 1) for n in range(1, 6)]


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 10_000), scale=st.sampled_from([0.1, 1.0, 5.0, 30.0, 60.0]))
def test_marginals_equal_brute_force(n, seed, scale):
    scores = np.random.default_rng(seed).normal(size=(n, n)) * scale
    expected, expected_log_z = brute_force(scores)
    marginals = tree_marginals(scores)
    np.testing.assert_allclose(marginals, expected, atol=1e-6)
    np.testing.assert_allclose(marginals.sum(axis=1), 1.0, atol=1e-9)
    assert float(log_partition(scores)) == pytest.approx(expected_log_z, abs=1e-6)


def test_impossible_arcs_get_no_mass_and_a_batch_equals_each_sentence():
    rng = np.random.default_rng(1)
    sentences = [rng.normal(size=(n, n)) for n in (4, 1, 6)]
    sentences[0][2, :] = -np.inf
    sentences[0][2, 3] = 0.5  # word 2 can only take word 3 as head
    batch = np.full((3, 6, 6), -7.0)
    for b, scores in enumerate(sentences):
        batch[b, : len(scores), : len(scores)] = scores
    marginals = tree_marginals(batch, lengths=[4, 1, 6])
    for b, scores in enumerate(sentences):
        n = len(scores)
        np.testing.assert_allclose(marginals[b, :n, :n], brute_force(scores)[0], atol=1e-9)
        assert not marginals[b, n:].any() and not marginals[b, :, n:].any()
    assert marginals[0, 2, 3] == pytest.approx(1.0)


def test_one_dominant_tree_has_probability_one_without_overflow():
    n = 6
    heads = np.array([1, 1, 1, 2, 3, 3])  # word 1 the root
    scores = np.full((n, n), -500.0)
    scores[np.arange(n), heads] = 800.0
    scores[4, 0] = 795.0  # one small competitor: about e^-5 of the mass of word 4
    marginals = tree_marginals(scores)
    assert np.isfinite(marginals).all()
    assert marginals[np.arange(n), heads][[0, 1, 2, 3, 5]] == pytest.approx(1.0, abs=1e-12)
    expected, _ = brute_force(scores)
    assert marginals[4, 0] == pytest.approx(expected[4, 0], rel=1e-9)
    assert marginals[4, 0] == pytest.approx(np.exp(-5) / (1 + np.exp(-5)), rel=1e-6)
    assert float(log_partition(scores)) == pytest.approx(brute_force(scores)[1], rel=1e-12)


def test_several_words_sure_to_be_the_root_still_get_marginals():
    """The tree constraint forces arcs e^-2000 below their row's best: float64 cannot hold them, the
    floor keeps the Laplacian invertible, and the symmetric answer (each word the root 1/n) comes out."""
    for n, spread in ((2, 1000.0), (6, 2000.0), (40, 900.0)):
        scores = np.full((n, n), -spread)
        np.fill_diagonal(scores, 0.0)
        marginals = tree_marginals(scores)
        np.testing.assert_allclose(np.diag(marginals), 1.0 / n, rtol=1e-6)
        np.testing.assert_allclose(marginals.sum(axis=1), 1.0, atol=1e-9)
    arcs = np.full((1, 4, 4), -1500.0)
    arcs[0, 1:, 0] = 0.0  # three words sure to be the root; the decoder's layout, unit 0 the root
    arcs[0, 0, :] = arcs[0, [1, 2, 3], [1, 2, 3]] = NEG_INF
    heads = np.array([[-1, 0, 1, 1]])
    ones = np.ones((1, 4, 1), dtype=bool)
    result = decoded_tree_confidence(arcs, np.array([3]), heads, np.zeros((1, 4, 1)), ones, np.zeros((1, 4), int))
    np.testing.assert_allclose(result["head_prob"][0, 1], 1 / 3, rtol=1e-6)
    assert np.isfinite(result["tree_prob"][0]) and result["tree_prob"][0] > 0


def test_log_partition_gradient_is_the_marginals_and_marginals_pass_gradcheck():
    scores = torch.tensor(np.random.default_rng(2).normal(size=(5, 5)), requires_grad=True)
    (gradient,) = torch.autograd.grad(log_partition(scores), scores)
    np.testing.assert_allclose(gradient.numpy(), tree_marginals(scores.detach().numpy()), atol=1e-10)
    small = torch.tensor(np.random.default_rng(3).normal(size=(4, 4)), requires_grad=True)
    assert torch.autograd.gradcheck(tree_marginals, (small,), eps=1e-6, atol=1e-6)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="NaN"):
        tree_marginals(np.array([[0.0, np.nan], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="shape"):
        tree_marginals(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="lengths"):
        tree_marginals(np.zeros((1, 3, 3)), lengths=[4])
    no_tree = np.zeros((2, 3, 3))
    no_tree[1, 2, :] = -np.inf  # word 2 of sentence 1 can have no head, not even the root
    with pytest.raises(ValueError, match=r"no single-root tree .* \[1\]"):
        tree_marginals(no_tree)
    with pytest.raises(ValueError, match="no possible head"):
        log_partition(no_tree[1])


def test_layouts_convert_both_ways():
    arcs = np.random.default_rng(4).normal(size=(2, 5, 5))
    diagonal = root_first_to_diagonal(arcs)
    assert diagonal[0, 1, 1] == arcs[0, 2, 0] and diagonal[1, 0, 3] == arcs[1, 1, 4]
    back = diagonal_to_root_first(diagonal)
    np.testing.assert_array_equal(back[:, 1:, :], np.where(np.eye(5, dtype=bool)[1:], 0, arcs[:, 1:, :]))


def decoder_layout(n: int, seed: int):
    """A (1, n + 1, n + 1) score matrix in the decoder's layout, unit 0 the root, and its mask."""
    arcs = np.random.default_rng(seed).normal(size=(1, n + 1, n + 1)) * 2
    return arcs, np.ones((1, n + 1))


def test_decoded_tree_confidence_reads_the_marginals_of_the_chosen_tree():
    n, k = 4, 3
    arcs, _ = decoder_layout(n, 5)
    heads = np.array([[-1, 2, 0, 2, 3]])
    label_scores = np.random.default_rng(6).normal(size=(1, n + 1, 3))
    allowed = np.ones((1, n + 1, 3), dtype=bool)
    labels = label_scores.argmax(-1)
    result = decoded_tree_confidence(arcs, np.array([n]), heads, label_scores, allowed, labels, n_candidates=k)
    marginals, log_z = brute_force(root_first_to_diagonal(arcs)[0])
    chosen = [marginals[i - 1, i - 1] if heads[0, i] == 0 else marginals[i - 1, heads[0, i] - 1] for i in range(1, 5)]
    np.testing.assert_allclose(result["head_prob"][0, 1:], chosen, atol=1e-9)
    label_probs = np.exp(label_scores - logsumexp(label_scores, axis=-1, keepdims=True))
    np.testing.assert_allclose(result["dep_prob"][0, 1:], label_probs.max(-1)[0, 1:], atol=1e-9)
    tree = sum(arcs[0, i, heads[0, i]] for i in range(1, 5))
    expected_tree = np.exp(tree - log_z) * label_probs.max(-1)[0, 1:].prod()
    assert result["tree_prob"][0] == pytest.approx(expected_tree, rel=1e-9)
    candidate_probs = result["candidate_probs"][0, 1:]
    assert (np.diff(candidate_probs, axis=1) <= 0).all()
    assert candidate_probs[:, 0] == pytest.approx(result["marginals"][0, 1:].max(axis=1))
    hotter = decoded_tree_confidence(arcs, np.array([n]), heads, label_scores, allowed, labels, 3.0, 3.0)
    assert np.abs(hotter["head_prob"][0, 1:] - 0.5).max() < np.abs(result["head_prob"][0, 1:] - 0.5).max()


def test_tree_crf_loss_is_the_gold_trees_negative_log_likelihood_with_its_gradient():
    n = 4
    arcs, mask = decoder_layout(n, 7)
    gold = np.array([[-1, 2, 0, 2, 2]])
    loss, d_arcs = tree_crf_arc_loss(arcs, mask, gold)
    marginals, log_z = brute_force(root_first_to_diagonal(arcs)[0])
    gold_score = sum(arcs[0, i, gold[0, i]] for i in range(1, n + 1))
    assert loss == pytest.approx(log_z - gold_score, rel=1e-9)
    numeric = np.zeros_like(arcs)
    for i, j in itertools.product(range(1, n + 1), range(n + 1)):
        if i == j:
            continue
        step = np.zeros_like(arcs)
        step[0, i, j] = 1e-6
        numeric[0, i, j] = (
            tree_crf_arc_loss(arcs + step, mask, gold)[0] - tree_crf_arc_loss(arcs - step, mask, gold)[0]
        ) / 2e-6
    np.testing.assert_allclose(d_arcs, numeric, atol=1e-6)


def test_biaffine_loss_takes_the_tree_crf_only_for_whole_gold_trees():
    arcs = np.random.default_rng(8).normal(size=(2, 5, 5))
    mask = np.ones((2, 5))
    gold = np.array([[-1, 2, 0, 2, 2], [-1, 2, 0, -1, 2]])  # sentence 1 lacks word 3's head
    labels = np.array([[-1, 0, 1, 0, 0], [-1, 0, 1, -1, 0]])
    label_scores = np.zeros((2, 5, 2))
    assert gold_tree_rows(gold, mask).tolist() == [True, False]
    _, d_local, _ = biaffine_loss(arcs, label_scores, mask, gold, labels)
    _, d_crf, _ = biaffine_loss(arcs, label_scores, mask, gold, labels, arc_objective="tree_crf")
    np.testing.assert_allclose(d_crf[1], d_local[1])  # the partial sentence keeps the local loss
    assert not np.allclose(d_crf[0], d_local[0])
    n_known = int((gold >= 0).sum())
    np.testing.assert_allclose(d_crf[0], tree_crf_arc_loss(arcs[:1], mask[:1], gold[:1])[1][0] / n_known)


@pytest.mark.parametrize("n, seed", [(5, 1593), (4, 285), (6, 7)])
def test_ill_conditioned_sentences_are_exact_by_elimination(n, seed):
    """Scores spread over e^+-90 (the examples CI found): a Laplacian entry rounds away the weights
    tying a group of words to the rest, LU gives garbage or det 0, the elimination is exact."""
    scores = np.random.default_rng(seed).normal(size=(n, n)) * 30.0
    expected, expected_log_z = brute_force(scores)
    batch = np.stack([scores, np.random.default_rng(0).normal(size=(n, n))])  # beside a well-conditioned one
    marginals = tree_marginals(batch)
    np.testing.assert_allclose(marginals[0], expected, atol=1e-10)
    np.testing.assert_allclose(marginals[1], brute_force(batch[1])[0], atol=1e-10)
    assert float(log_partition(scores)) == pytest.approx(expected_log_z, abs=1e-9)


def test_exact_elimination_equals_lu_on_a_padded_batch_and_passes_gradcheck():
    rng = np.random.default_rng(5)
    scores, lengths = torch.tensor(rng.normal(size=(3, 6, 6))), torch.tensor([6, 2, 4])
    laplacian, arc_weights, root_weights, _ = _shifted_laplacian(scores, lengths)
    log_det = _eliminated_log_det(arc_weights, root_weights, lengths)
    np.testing.assert_allclose(log_det.numpy(), torch.linalg.slogdet(laplacian)[1].numpy(), atol=1e-12)
    exact, _ = _eliminated_marginals(arc_weights, root_weights, lengths)
    np.testing.assert_allclose(exact.numpy(), tree_marginals(scores.numpy(), lengths=lengths.numpy()), atol=1e-12)
    spread = torch.tensor(np.random.default_rng(285).normal(size=(4, 4)) * 30.0, requires_grad=True)  # exact path
    assert torch.autograd.gradcheck(tree_marginals, (spread,), eps=1e-6, atol=1e-5)
    (gradient,) = torch.autograd.grad(log_partition(spread), spread)
    np.testing.assert_allclose(gradient.numpy(), brute_force(spread.detach().numpy())[0], atol=1e-9)


def test_a_sentence_lu_finds_singular_is_computed_exactly(monkeypatch):
    """A zero pivot in the batched LU (info != 0) sends that sentence to exact elimination; the
    others keep LU's answer and nothing divides by the zero pivot."""
    real_factor = torch.linalg.lu_factor_ex

    def factor_reporting_the_second_sentence_singular(matrix):
        factors, pivots, info = real_factor(matrix)
        return factors, pivots, info.index_fill(0, torch.tensor([1]), 1)

    monkeypatch.setattr(torch.linalg, "lu_factor_ex", factor_reporting_the_second_sentence_singular)
    scores = np.random.default_rng(9).normal(size=(3, 4, 4))
    marginals, log_z = tree_marginals_with_log_partition(scores)
    for sentence in range(3):
        expected, expected_log_z = brute_force(scores[sentence])
        np.testing.assert_allclose(marginals[sentence].numpy(), expected, atol=1e-9)
        assert float(log_z[sentence]) == pytest.approx(expected_log_z, abs=1e-9)


def test_no_tree_with_weight_gives_nan_not_a_guess():
    scores = np.random.default_rng(4).normal(size=(3, 3))
    np.fill_diagonal(scores, -np.inf)  # every word has a head but none may be the root
    assert np.isnan(tree_marginals(scores)).all()
    assert np.isnan(tree_marginals_with_log_partition(scores)[1]).all()


@pytest.mark.parametrize("gap", [356.0, 420.0, 498.0])
def test_trees_that_need_an_arc_far_below_its_rows_best_are_exact(gap):
    """Every tree needs a root arc `gap` nats below its row's best (the words prefer each other):
    a pivot near e^-gap, whose square the gradient through elimination overflowed to NaN past 354."""
    rng = np.random.default_rng(int(gap))
    for n in (2, 3, 5):
        scores = rng.normal(size=(n, n))
        np.fill_diagonal(scores, -gap + rng.normal(size=n))
        expected, expected_log_z = brute_force(np.maximum(scores, scores.max(axis=1, keepdims=True) - LOG_FLOOR))
        marginals, log_z = tree_marginals_with_log_partition(scores)
        np.testing.assert_allclose(marginals[0].numpy(), expected, atol=1e-10)
        assert float(log_z[0]) == pytest.approx(expected_log_z, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 6), seed=st.integers(0, 10_000), scale=st.sampled_from([100.0, 200.0, 400.0]))
def test_scores_spread_over_hundreds_of_nats_equal_brute_force_of_the_floored_scores(n, seed, scale):
    scores = np.random.default_rng(seed).normal(size=(n, n)) * scale
    floored = np.maximum(scores, scores.max(axis=1, keepdims=True) - LOG_FLOOR)
    expected, expected_log_z = brute_force(floored)
    marginals, log_z = tree_marginals_with_log_partition(scores)
    np.testing.assert_allclose(marginals[0].numpy(), expected, atol=1e-9)
    assert float(log_z[0]) == pytest.approx(expected_log_z, rel=1e-10)


def test_huge_equal_scores_give_uniform_marginals_and_an_infinite_log_z():
    marginals, log_z = tree_marginals_with_log_partition(np.full((20, 20), 1e307))
    np.testing.assert_allclose(marginals[0].numpy(), 1 / 20, rtol=1e-9)  # every arc, and the root, alike
    assert float(log_z[0]) == float("inf")  # 20 x 1e307 is over float64's largest


def test_empty_input_gives_empty_marginals_and_log_z_zero():
    assert tree_marginals(np.zeros((0, 0))).shape == (0, 0)
    assert float(log_partition(np.zeros((0, 0)))) == 0.0
    assert tree_marginals(np.zeros((3, 0, 0))).shape == (3, 0, 0)
    assert log_partition(np.zeros((0, 4, 4))).shape == (0,)
    scores = np.random.default_rng(10).normal(size=(2, 3, 3))
    marginals = tree_marginals(scores, lengths=[0, 3])
    assert not marginals[0].any()
    np.testing.assert_allclose(marginals[1], brute_force(scores[1])[0], atol=1e-9)
    assert log_partition(scores, lengths=[0, 3])[0] == 0.0


def ill_conditioned(n: int) -> np.ndarray:
    """Two halves of a sentence tied to each other only by arcs e^-60 below their own."""
    scores = np.random.default_rng(n).normal(size=(n, n))
    half = np.arange(n) >= n // 2
    scores[half[:, None] != half[None, :]] -= 60.0
    np.fill_diagonal(scores, -60.0)
    scores[0, 0] = 0.0
    return scores


def test_the_exact_path_keeps_no_graph_and_its_gradients_are_right():
    """The elimination's marginals come from a hand-written reverse pass: no autograd graph in the
    forward pass (the old graph was O(n^3)), only one node for the whole elimination."""
    scores = ill_conditioned(40)
    laplacian, arc_weights, root_weights, _ = _shifted_laplacian(torch.tensor(scores)[None], torch.tensor([40]))
    assert not _lu_marginals(laplacian, arc_weights, root_weights, CONDITION_LIMIT)[2].any()  # the exact path
    marginals = tree_marginals(scores)
    np.testing.assert_allclose(marginals.sum(axis=1), 1.0, atol=1e-12)
    assert marginals[20:, :20].sum() == pytest.approx(1.0, abs=1e-9)  # one arc joins the halves
    tensor = torch.tensor(scores, requires_grad=True)
    nodes, seen, stack = 0, set(), [tree_marginals(tensor).grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        nodes += 1
        stack.extend(next_node for next_node, _ in node.next_functions)
    assert nodes < 60  # the old graph: several nodes per eliminated word
    (gradient,) = torch.autograd.grad(log_partition(tensor), tensor)
    np.testing.assert_allclose(gradient.numpy(), marginals, atol=1e-12)
