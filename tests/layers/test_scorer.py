"""Pair scorers and losses on small hand-made inputs."""

import numpy as np
import pytest
import torch

from spacy_pairatt.core.alignment import DocAlignments, Groups
from spacy_pairatt.core.layout import candidate_mask
from spacy_pairatt.core.objectives import arc_log_scores, best_labels, biaffine_loss, paper_loss
from spacy_pairatt.core.pooling import WordAttention
from spacy_pairatt.layers.pair_batch import WindowBatch, chunk_batch
from spacy_pairatt.layers.pair_scorer import build_pair_scorer
from spacy_pairatt.layers.torch_scorers import PROJECTIONS, BiaffinePairScorer, PairAttention, PaperPairScorer


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
    dense = attention.dense()  # the given maps (test_alignment checks the round trip)
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


def test_biaffine_arc_and_label_scores_match_their_formulas():
    torch.manual_seed(0)
    scorer = BiaffinePairScorer(5, 6, 3, True, False, dropout=0.0, arc_width=4, label_width=2).eval()
    for parameter in scorer.parameters():
        torch.nn.init.normal_(parameter)
    hidden, attention, missing, unshared = random_inputs()
    arcs, state = scorer(hidden, None, torch.zeros_like(missing), torch.zeros_like(unshared))
    dep = scorer.projections["arc_dependent"](hidden)
    head = scorer.projections["arc_head"](hidden)
    b, i, j = 0, 1, 3
    arc = dep[b, i] @ scorer.arc_bilinear @ head[b, j] + scorer.arc_head_bias(head[b, j])[0]
    torch.testing.assert_close(arcs[b, i, j], arc)
    # Two dependents of one head (scored with that head's U @ h computed once), one arc elsewhere.
    heads = torch.full((2, 4), -1)
    arcs_given = [(0, 1, 3), (0, 2, 3), (1, 2, 0)]
    for b, i, j in arcs_given:
        heads[b, i] = j
    labels = scorer.label_scores_at(state, heads)
    label_dep = scorer.projections["label_dependent"](hidden)
    label_head = scorer.projections["label_head"](hidden)
    for b, i, j in arcs_given:
        for k in range(3):
            label = (
                label_dep[b, i] @ scorer.label_bilinear[k] @ label_head[b, j]
                + scorer.label_dependent.weight[k] @ label_dep[b, i]
                + scorer.label_head.weight[k] @ label_head[b, j]
                + scorer.label_bias[k]
            )
            torch.testing.assert_close(labels[b, i, k], label)
    with torch.no_grad():
        torch.testing.assert_close(scorer.label_scores_at(state, heads), labels.detach())
    scored = labels.detach().abs().sum(-1) > 0
    assert scored.nonzero().tolist() == [[b, i] for b, i, _ in arcs_given]  # units without a head get zeros


def test_mlps_on_nonzero_rows_give_the_scores_and_gradients_of_every_row():
    """`_projected` runs the four MLPs, as one, on a chunk's nonzero rows only and gives every zero
    row (padding, a unit without wordpieces) the projection of a zero vector: the projections, the
    arc scores and the parameters' gradients are those of projecting every row with each MLP, and so
    is the gradient of every nonzero row. A zero row's own gradient is dropped: it has no wordpieces
    to pool from, so it reaches no window."""
    torch.manual_seed(0)
    scorer = BiaffinePairScorer(5, 6, 3, True, False, dropout=0.0, arc_width=4, label_width=2).train()
    for parameter in scorer.parameters():
        torch.nn.init.normal_(parameter)
    hidden = torch.randn(2, 4, 5)
    hidden[0, 2] = 0.0  # a unit without wordpieces
    hidden[1, 3] = 0.0  # padding
    hidden.requires_grad_()
    projected = scorer._projected(hidden)
    each = [scorer.projections[name](hidden) for name in PROJECTIONS]
    for got_projection, expected_projection in zip(projected, each, strict=True):
        torch.testing.assert_close(got_projection, expected_projection)
    arcs = scorer._arcs(*projected[:2])
    dependent, head = each[:2]
    direct = dependent @ scorer.arc_bilinear @ head.transpose(1, 2) + scorer.arc_head_bias(head)[:, None, :, 0]
    torch.testing.assert_close(arcs, direct)
    assert (arcs[0, 2] != 0).all() and (arcs[1, :, 3] != 0).all()  # zero rows are scored, not left out
    weights = torch.randn_like(arcs)
    inputs = [hidden, *(p for name, p in scorer.named_parameters() if name.startswith(("projections.arc", "arc_")))]
    got, expected = (
        torch.autograd.grad((arcs * weights).sum(), inputs),
        torch.autograd.grad((direct * weights).sum(), inputs),
    )
    nonzero = hidden.detach().abs().sum(-1) > 0
    torch.testing.assert_close(got[0][nonzero], expected[0][nonzero])
    assert (got[0][~nonzero] == 0).all()
    for got_parameter, expected_parameter in zip(got[1:], expected[1:]):
        torch.testing.assert_close(got_parameter, expected_parameter)


LOSS_MASK = np.array([[1, 1, 1, 1], [1, 1, 1, 0]], dtype="float32")
LOSS_GOLD_HEADS = np.array([[-1, 2, 0, 2], [-1, 0, 1, -1]])
LOSS_GOLD_LABELS = np.array([[-1, 1, 0, 2], [-1, 0, 2, -1]])


def assert_gradient_is_the_finite_difference(loss_of, values, grad, indices):
    eps = 1e-6
    loss = loss_of(values)
    for index in indices:
        shifted = values.copy()
        shifted[index] += eps
        assert grad[index] == pytest.approx((loss_of(shifted) - loss) / eps, abs=1e-4)


def test_paper_loss_gradient_matches_finite_differences():
    scores = np.random.default_rng(0).normal(size=(2, 4, 4, 4))
    loss, grad = paper_loss(scores, LOSS_MASK, LOSS_GOLD_HEADS, LOSS_GOLD_LABELS)
    assert_gradient_is_the_finite_difference(
        lambda s: paper_loss(s, LOSS_MASK, LOSS_GOLD_HEADS, LOSS_GOLD_LABELS)[0],
        scores,
        grad,
        [(0, 1, 2, 2), (0, 3, 2, 3), (1, 2, 1, 3), (0, 1, 0, 0), (0, 2, 3, 1)],
    )
    # padding and the root row get no gradient
    assert np.abs(grad[1, 3]).sum() == 0 and np.abs(grad[:, 0]).sum() == 0


def test_biaffine_loss_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    arcs, labels = rng.normal(size=(2, 4, 4)), rng.normal(size=(2, 4, 3))
    loss, d_arcs, d_labels = biaffine_loss(arcs, labels, LOSS_MASK, LOSS_GOLD_HEADS, LOSS_GOLD_LABELS)
    assert_gradient_is_the_finite_difference(
        lambda a: biaffine_loss(a, labels, LOSS_MASK, LOSS_GOLD_HEADS, LOSS_GOLD_LABELS)[0],
        arcs,
        d_arcs,
        [(0, 1, 2), (0, 3, 2), (1, 2, 1), (0, 1, 0), (0, 2, 3)],
    )
    assert_gradient_is_the_finite_difference(
        lambda lab: biaffine_loss(arcs, lab, LOSS_MASK, LOSS_GOLD_HEADS, LOSS_GOLD_LABELS)[0],
        labels,
        d_labels,
        [(0, 1, 1), (0, 3, 0), (1, 2, 2), (1, 1, 0)],
    )
    # padding, the root row and impossible arcs (to padding, to itself) get no gradient
    assert np.abs(d_arcs[1, 3]).sum() == 0 and np.abs(d_arcs[:, 0]).sum() == 0
    assert d_arcs[1, 1, 3] == 0 and d_arcs[0, 2, 2] == 0
    assert np.abs(d_labels[1, 3]).sum() == 0 and np.abs(d_labels[:, 0]).sum() == 0
    # a chunk without a gold arc (all -1) adds nothing, rather than failing or dividing by zero
    none = np.full_like(LOSS_GOLD_HEADS, -1)
    loss, d_arcs, d_labels = biaffine_loss(arcs, labels, LOSS_MASK, none, none)
    assert loss == 0 and not d_arcs.any() and not d_labels.any()


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
    windows = WindowBatch([hidden], [[attention]], alignments, [2], [6], [0])
    batch = chunk_batch(windows, Groups.sentences([0], [0], [4]), [0], attention_requires_grad=False)
    scores, backprop = model(batch, is_train=True)
    assert scores.arcs.shape == (1, 5, 5, 1)
    labels = scores.labels_at(np.array([[-1, 0, 1, 1, 2]]))
    assert labels.shape == (1, 5, 3)
    d_windows = backprop((np.ones_like(scores.arcs), np.ones_like(labels)))
    assert d_windows.hidden[0].shape == hidden.shape and d_windows.attention is None
    owned = torch.zeros(2, 6, dtype=torch.bool)
    owned[0, [0, 1, 2, 3]] = owned[1, [0, 1]] = True  # wordpieces and each window's root position
    assert bool((d_windows.hidden[0].abs().sum(-1)[owned] > 0).all())
    assert float(d_windows.hidden[0].abs().sum(-1)[~owned].sum()) == 0


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
    # A chunk ends before its padding would cost more than max_padding times its own pairs.
    lengths = [2, 3, 4, 10, 11, 20]
    for max_padding in (1.5, 2.0, 4.0):
        chunks = length_chunks(lengths, max_pairs=10_000, max_padding=max_padding)
        assert sorted(i for chunk in chunks for i in chunk) == list(range(6))
        for chunk in chunks:
            padded = len(chunk) * max(lengths[i] for i in chunk) ** 2
            assert padded <= max_padding * sum(lengths[i] ** 2 for i in chunk)
    assert len(length_chunks(lengths, 10_000, 4.0)) < len(length_chunks(lengths, 10_000, 1.5))


def test_labels_on_gold_arcs_give_the_loss_and_gradients_of_scoring_every_label():
    """Training scores labels on the gold arcs only. Its loss and its gradients (to the unit vectors,
    the attention maps and every parameter) equal a direct computation over every label of every
    pair, written from the formulas: the loss reads labels nowhere else."""
    torch.manual_seed(0)
    n_maps, n_labels, batch, n_units = 6, 5, 3, 7
    module = BiaffinePairScorer(16, n_maps, n_labels, True, True, 0.0, 8, 4).train()
    for parameter in module.parameters():
        torch.nn.init.normal_(parameter, std=0.5)
    hidden = torch.randn(batch, n_units, 16, requires_grad=True)
    dense = torch.rand(batch, n_maps, n_units, n_units, requires_grad=True)
    missing = (torch.rand(batch, n_units) > 0.7).float()
    unshared = (torch.rand(batch, n_units, n_units) > 0.7).float()
    mask = np.ones((batch, n_units), dtype="float32")
    mask[-1, -2:] = 0
    rng = np.random.default_rng(0)
    gold_heads = np.full((batch, n_units), -1)
    for b in range(batch):
        real = int(mask[b].sum())
        for i in range(1, real):
            gold_heads[b, i] = rng.choice([j for j in range(real) if j != i])
    gold_heads[0, 3] = -1  # a word without a usable gold arc
    gold_labels = np.where(gold_heads >= 0, rng.integers(0, n_labels, size=gold_heads.shape), -1)

    def gradients():
        named = [("hidden", hidden), ("attention", dense), *module.named_parameters()]
        grads = {name: tensor.grad.clone() for name, tensor in named if tensor.grad is not None}
        for _, tensor in named:
            tensor.grad = None
        return grads

    arcs, state = module(hidden, WordAttention.from_dense(dense), missing, unshared)
    labels = module.label_scores_at(state, torch.as_tensor(gold_heads))
    loss, d_arcs, d_labels = biaffine_loss(
        arcs.detach().numpy(), labels.detach().numpy(), mask, gold_heads, gold_labels
    )
    torch.autograd.backward([arcs, labels], [torch.as_tensor(d_arcs), torch.as_tensor(d_labels)])
    on_gold_arcs = gradients()

    p = {name: layer(hidden) for name, layer in module.projections.items()}
    arc = (
        p["arc_dependent"] @ module.arc_bilinear @ p["arc_head"].transpose(1, 2)
        + module.arc_head_bias(p["arc_head"])[..., 0][:, None]
    )
    label = (
        torch.einsum("bid,kde,bje->bijk", p["label_dependent"], module.label_bilinear, p["label_head"])
        + module.label_dependent(p["label_dependent"])[:, :, None]
        + module.label_head(p["label_head"])[:, None]
        + module.label_bias
    )
    indicators = module.indicators
    full = (
        torch.cat([arc[..., None], label], dim=-1)
        + missing[:, :, None, None] * indicators.missing_dependent
        + missing[:, None, :, None] * indicators.missing_head
        + unshared[..., None] * indicators.unshared
        + torch.einsum("cf,bfij->bijc", module.attention.forward_map, dense)
        + torch.einsum("cf,bfji->bijc", module.attention.backward_map, dense)
    )
    b, i = np.nonzero(gold_heads >= 0)
    h, k = gold_heads[b, i], gold_labels[b, i]
    valid = torch.as_tensor(candidate_mask(mask))
    arc_log_probs = torch.log_softmax(full[..., 0].masked_fill(~valid, -1e9)[b, i], dim=-1)[np.arange(len(b)), h]
    label_log_probs = torch.log_softmax(full[b, i, h, 1:], dim=-1)[np.arange(len(b)), k]
    direct = -(arc_log_probs + label_log_probs).mean()
    direct.backward()
    every_label = gradients()

    assert loss == pytest.approx(direct.item(), rel=1e-5)
    assert on_gold_arcs.keys() == every_label.keys() and {"hidden", "attention"} <= on_gold_arcs.keys()
    for name, grad in every_label.items():
        torch.testing.assert_close(on_gold_arcs[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_arc_and_label_terms_drop_the_same_attention_maps():
    """Map dropout is drawn once per pass: the label scores of a sentence lose the maps its arc scores lose."""
    torch.manual_seed(0)
    module = BiaffinePairScorer(4, 4, 3, False, True, dropout=0.5, arc_width=4, label_width=4)
    torch.nn.init.normal_(module.attention.forward_map)
    torch.nn.init.normal_(module.attention.backward_map)
    module.requires_grad_(False)
    dense = torch.zeros(32, 4, 5, 5)
    dense[:, 2] = torch.rand(32, 5, 5) + 0.1  # only map 2 is non-zero
    no_flags = torch.zeros(32, 5), torch.zeros(32, 5, 5)
    heads = torch.randint(0, 5, (32, 5))
    scored = {}
    for training in (False, True):
        module.train(training)
        arcs, state = module(torch.zeros(32, 5, 4), WordAttention.from_dense(dense), *no_flags)
        scored[training] = arcs, module.label_scores_at(state, heads)
    kept = [torch.isclose(dropped, 2 * full).flatten(1).all(1) for dropped, full in zip(scored[True], scored[False])]
    zeroed = [(dropped == 0).flatten(1).all(1) for dropped in scored[True]]
    assert kept[0].tolist() == kept[1].tolist()
    assert bool((kept[0] | zeroed[0]).all()) and bool((kept[1] | zeroed[1]).all())
    assert 0 < int(kept[0].sum()) < 32


def test_without_label_attention_the_attention_moves_the_arcs_and_not_the_labels():
    """label_attention false: one attention channel (the arc's); the label scores read the hidden states only."""
    torch.manual_seed(0)
    module = BiaffinePairScorer(5, 6, 3, True, True, 0.0, arc_width=4, label_width=2, label_attention=False).eval()
    for parameter in module.parameters():
        torch.nn.init.normal_(parameter)
    assert module.attention.forward_map.shape == (1, 6)
    hidden, attention, missing, unshared = random_inputs()
    other = WordAttention.from_dense(torch.rand(2, 6, 4, 4, generator=torch.Generator().manual_seed(1)))
    heads = torch.tensor([[-1, 0, 1, 1], [2, 0, -1, 2]])
    arcs, labels = {}, {}
    for name, maps in (("given", attention), ("other", other)):
        arcs[name], state = module(hidden, maps, missing, unshared)
        labels[name] = module.label_scores_at(state, heads)
    assert not torch.allclose(arcs["given"], arcs["other"])
    torch.testing.assert_close(labels["given"], labels["other"])
    assert int((labels["given"].abs().sum(-1) > 0).sum()) == 6  # every unit with a head is scored


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


def test_arc_attention_is_kept_for_the_batch_only_without_gradients():
    """At inference the arc term's projection of the windows is kept in the batch's `projected`, once
    per bucket; with gradients it is not (each chunk's backward frees its own graph), and both agree."""
    torch.manual_seed(0)
    module = PairAttention(n_attention=6, n_out=3, dropout=0.0).eval()
    torch.nn.init.normal_(module.forward_map)
    torch.nn.init.normal_(module.backward_map)
    dense = torch.rand(2, 6, 4, 4)
    scores = {}
    for grad in (True, False):
        projected = {}
        shared = WordAttention.from_dense(dense)
        shared.projected = projected
        with torch.set_grad_enabled(grad):
            scores[grad] = module(shared, slice(0, 1)), module(shared, slice(0, 1))
        assert len(projected) == (0 if grad else 1)
    torch.testing.assert_close(scores[True][0].detach(), scores[False][0])
    torch.testing.assert_close(scores[False][1], scores[False][0])
