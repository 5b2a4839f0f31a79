"""Pair scorers and losses on small hand-made inputs."""

import numpy as np
import pytest
import torch

from spacy_pairatt.core.alignment import DocAlignments, Groups
from spacy_pairatt.core.features import WindowBatch, chunk_batch
from spacy_pairatt.core.objectives import arc_log_scores, best_labels, candidate_mask, parser_loss
from spacy_pairatt.core.pooling import WordAttention
from spacy_pairatt.layers.pair_scorer import build_pair_scorer
from spacy_pairatt.layers.torch_scorers import BiaffinePairScorer, PairAttention, PaperPairScorer


def random_inputs(batch=2, n=4, width=5, n_att=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(batch, n, width, generator=g)
    attention = torch.rand(batch, n_att, n, n, generator=g)
    missing = torch.zeros(batch, n)
    missing[0, 2] = 1.0
    unshared = torch.zeros(batch, n, n)
    unshared[1, 1, 3] = 1.0
    return hidden, WordAttention.from_dense(attention), missing, unshared


def test_paper_scorer_is_a_linear_layer_over_the_concatenation():
    """Eq. 5: scores[b, i, j] = W (T_i ∘ T_j ∘ a_ij ∘ a_ji) + b, checked against the explicit concat."""
    torch.manual_seed(0)
    width, n_att, n_labels = 5, 6, 3
    scorer = PaperPairScorer(width, n_att, n_labels, use_embeddings=True, use_attention=True, dropout=0.0).eval()
    for parameter in scorer.parameters():
        torch.nn.init.normal_(parameter)
    hidden, attention, missing, unshared = random_inputs(width=width, n_att=n_att)
    missing.zero_()
    unshared.zero_()
    scores = scorer(hidden, attention, missing, unshared)
    weight = torch.cat(
        [scorer.dependent.weight, scorer.head.weight, scorer.attention.forward_map, scorer.attention.backward_map],
        dim=1,
    )
    b, i, j = 1, 2, 3
    dense = attention.blocks
    concat = torch.cat([hidden[b, i], hidden[b, j], dense[b, :, i, j], dense[b, :, j, i]])
    expected = weight @ concat + scorer.bias
    torch.testing.assert_close(scores[b, i, j], expected)
    assert scores.shape == (2, 4, 4, 1 + n_labels)


def test_indicator_features_change_only_their_pairs():
    torch.manual_seed(0)
    scorer = PaperPairScorer(5, 6, 3, use_embeddings=True, use_attention=True, dropout=0.0).eval()
    torch.nn.init.normal_(scorer.indicators.unshared)
    hidden, attention, missing, unshared = random_inputs()
    base = scorer(hidden, attention, torch.zeros_like(missing), torch.zeros_like(unshared))
    flagged = scorer(hidden, attention, torch.zeros_like(missing), unshared)
    diff = (flagged - base).abs().sum(-1)
    assert diff[1, 1, 3] > 0
    diff[1, 1, 3] = 0
    assert diff.max() == 0


def test_biaffine_arc_score_matches_its_formula():
    torch.manual_seed(0)
    scorer = BiaffinePairScorer(5, 6, 3, True, False, dropout=0.0, arc_width=4, label_width=2).eval()
    for parameter in scorer.parameters():
        torch.nn.init.normal_(parameter)
    hidden, attention, missing, unshared = random_inputs()
    scores = scorer(hidden, None, torch.zeros_like(missing), torch.zeros_like(unshared))
    dep = scorer.projections["arc_dependent"](hidden)
    head = scorer.projections["arc_head"](hidden)
    b, i, j = 0, 1, 3
    arc = dep[b, i] @ scorer.arc_bilinear @ head[b, j] + scorer.arc_head_bias(head[b, j])[0]
    torch.testing.assert_close(scores[b, i, j, 0], arc)
    label_dep = scorer.projections["label_dependent"](hidden)[b, i]
    label_head = scorer.projections["label_head"](hidden)[b, j]
    k = 2
    label = (
        label_dep @ scorer.label_bilinear[k] @ label_head
        + scorer.label_dependent.weight[k] @ label_dep
        + scorer.label_head.weight[k] @ label_head
        + scorer.label_bias[k]
    )
    torch.testing.assert_close(scores[b, i, j, 1 + k], label)


@pytest.mark.parametrize("mode", ["paper", "biaffine"])
def test_loss_gradient_matches_finite_differences(mode):
    rng = np.random.default_rng(0)
    mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]], dtype="float32")
    scores = rng.normal(size=(2, 4, 4, 4))
    gold_heads = np.array([[-1, 2, 0, 2], [-1, 0, 1, -1]])
    gold_labels = np.array([[-1, 1, 0, 2], [-1, 0, 2, -1]])
    loss, grad = parser_loss(scores, mask, gold_heads, gold_labels, mode)
    eps = 1e-6
    for index in [(0, 1, 2, 2), (0, 3, 2, 3), (1, 2, 1, 3), (0, 1, 0, 0), (0, 2, 3, 1)]:
        shifted = scores.copy()
        shifted[index] += eps
        numeric = (parser_loss(shifted, mask, gold_heads, gold_labels, mode)[0] - loss) / eps
        assert grad[index] == pytest.approx(numeric, abs=1e-4)
    # padding and the root row get no gradient
    assert np.abs(grad[1, 3]).sum() == 0 and np.abs(grad[:, 0]).sum() == 0


def test_arc_scores_mask_impossible_arcs_and_labels_respect_root():
    mask = np.array([[1, 1, 1, 0]], dtype="float32")
    valid = candidate_mask(mask)
    assert valid[0].tolist() == [
        [False, False, False, False],
        [True, False, True, False],
        [True, True, False, False],
        [False, False, False, False],
    ]
    scores = np.zeros((1, 4, 4, 3))
    arcs = arc_log_scores(scores, mask, "biaffine")
    assert np.allclose(np.exp(arcs[0, 1, [0, 2]]), 0.5)
    scores[0, 1, 0, 1:] = [5.0, 1.0]  # label 0 is best on the root arc but not allowed there
    heads = np.array([-1, 0, 1, 1])
    label_scores = scores[0, [1, 2, 3], heads[1:], 1:]
    labels = best_labels(label_scores, heads[1:], np.array([False, True]), np.array([True, False]))
    assert labels.tolist() == [1, 0, 0]


def test_thinc_scorer_builds_lazily_and_backprops_to_the_windows():
    """The scorer pools from the windows itself: its backprop reaches the wordpieces the units own."""
    model = build_pair_scorer(mode="biaffine", arc_width=8, label_width=4, dropout=0.0)
    model.set_dim("nI", 5)
    model.set_dim("nA", 6)
    model.set_dim("nO", 4)
    model.initialize()
    g = torch.Generator().manual_seed(0)
    hidden, attention = torch.randn(2, 6, 5, generator=g), torch.rand(2, 6, 6, 6, generator=g)
    # One Doc of 4 tokens over two windows of 6 positions; token 2 owns no wordpiece.
    alignments = DocAlignments.from_docs([np.array([1, 2, 0, 1])], [np.array([1, 2, 3, 7])], [(2, 6)])
    windows = WindowBatch(hidden, [attention], alignments, [2], [6], [0], n_heads=6)
    batch = chunk_batch(windows, Groups.sentences([0], [0], [4]), [0], attention_requires_grad=False)
    scores, backprop = model(batch, is_train=True)
    assert scores.shape == (1, 5, 5, 4)
    d_windows = backprop(np.ones_like(scores))
    assert d_windows.hidden.shape == hidden.shape and d_windows.attention is None
    owned = torch.zeros(2, 6, dtype=torch.bool)
    owned[0, [0, 1, 2, 3]] = owned[1, [0, 1]] = True  # wordpieces and each window's root position
    assert bool((d_windows.hidden.abs().sum(-1)[owned] > 0).all())
    assert float(d_windows.hidden.abs().sum(-1)[~owned].sum()) == 0


def test_scorer_config_errors():
    with pytest.raises(ValueError, match="mode"):
        build_pair_scorer(mode="bilinear")
    with pytest.raises(ValueError, match="use_embeddings or use_attention"):
        build_pair_scorer(use_embeddings=False, use_attention=False)


def test_length_chunks_bound_padded_pairs():
    from spacy_pairatt.layers.unit_scoring import length_chunks

    lengths = [5, 30, 6, 2, 31, 7]
    chunks = length_chunks(lengths, max_pairs=200)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(6))
    for chunk in chunks:
        longest = max(lengths[i] for i in chunk)
        assert len(chunk) == 1 or len(chunk) * longest**2 <= 200
    assert chunks[0] == [3, 0, 2, 5]  # short sentences together, in length order
    assert length_chunks([], 10) == []


def test_inference_arcs_and_labels_on_chosen_arcs_equal_the_full_scores():
    """arc_scores + label_scores_at (inference) give exactly what forward gives for those pairs."""
    torch.manual_seed(0)
    module = BiaffinePairScorer(16, 6, 5, True, True, 0.1, 8, 4).eval()
    for parameter in module.parameters():
        torch.nn.init.normal_(parameter)
    batch, n_units = 3, 7
    hidden = torch.randn(batch, n_units, 16)
    attention = WordAttention.from_dense(torch.rand(batch, 6, n_units, n_units))
    missing = (torch.rand(batch, n_units) > 0.7).float()
    unshared = (torch.rand(batch, n_units, n_units) > 0.7).float()
    heads = torch.randint(0, n_units, (batch, n_units))
    heads[:, 0] = heads[-1, -2:] = -1  # the root and padding: not scored
    with torch.no_grad():
        full = module(hidden, attention, missing, unshared)
        arcs, state = module.arc_scores(hidden, attention, missing, unshared)
        labels = module.label_scores_at(state, heads)
    torch.testing.assert_close(arcs, full[..., 0], atol=1e-4, rtol=1e-4)
    chosen = full[torch.arange(batch)[:, None], torch.arange(n_units)[None], heads.clamp(min=0), 1:]
    scored = heads >= 0
    torch.testing.assert_close(labels[scored], chosen[scored], atol=1e-3, rtol=1e-4)
    assert float(labels[~scored].abs().sum()) == 0


def test_attention_dropout_drops_whole_maps_and_keeps_the_expectation():
    """Training drops whole (layer, head) maps per sentence, scaled by 1 / (1 - p); inference keeps all."""
    torch.manual_seed(0)
    module = PairAttention(n_attention=4, n_out=3, dropout=0.5)
    torch.nn.init.normal_(module.forward_map)
    torch.nn.init.normal_(module.backward_map)
    module.requires_grad_(False)
    attention = torch.zeros(64, 4, 5, 5)
    attention[:, 2] = torch.rand(64, 5, 5)  # only map 2 is non-zero
    module.eval()
    full = module(WordAttention.from_dense(attention))
    module.train()
    dropped = module(WordAttention.from_dense(attention))
    kept = torch.isclose(dropped, 2 * full, atol=1e-5).flatten(1).all(1)
    zeroed = (dropped == 0).flatten(1).all(1)
    assert bool((kept | zeroed).all())  # each sentence keeps or drops map 2 as a whole
    assert 10 < int(kept.sum()) < 54
    attention = WordAttention.from_dense(torch.rand(8, 4, 5, 5))
    module.eval()
    expected = module(attention)
    module.train()
    mean = torch.stack([module(attention) for _ in range(3000)]).mean(0)
    assert torch.allclose(mean, expected, atol=0.15 * float(expected.abs().mean()))
