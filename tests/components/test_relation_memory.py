"""pairatt_rel in bounded memory: entities in separate windows cost memory in
proportion to the entities, the scorer holds nothing larger than its own scores, and a Doc with
more candidate pairs than `max_pairs_per_doc` is refused by name."""

import numpy as np
import pytest
import spacy
import torch
from hypothesis import given, settings
from spacy.tokens import Doc, Span
from spacy.training import Example
from thinc.api import fix_random_seed
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from spacy_pairatt.core.alignment import DocAlignments, Groups, align_blocks
from spacy_pairatt.core.pooling import WordAttention
from spacy_pairatt.integration.doc_relations import USER_DATA_KEY, Relation, set_relation_arrays, set_relations
from spacy_pairatt.layers.pair_batch import entity_groups
from spacy_pairatt.layers.pair_scorer import torch_module
from spacy_pairatt.layers.torch_scorers import RelationPairScorer
from tests.conftest import make_transformer_pipeline
from tests.core.test_alignment import batches, pooled

WIDTH, N_MAPS, HIDDEN_WIDTH, N_LABELS = 8, 3, 16, 3


def separate_windows(n_entities: int, positions: int = 6):
    """The issue's Doc as an alignment: n 4-token sentences, sentence i alone in window i at positions
    1..4, its first token an entity, so no two entities share a window."""
    lengths = np.ones(4 * n_entities, dtype="int64")
    indices = np.arange(4 * n_entities) // 4 * positions + np.arange(4 * n_entities) % 4 + 1
    alignments = DocAlignments.from_docs([lengths], [indices], [(n_entities, positions)])
    groups = entity_groups([[[(4 * i, 4 * i + 1)] for i in range(n_entities)]])
    return align_blocks(alignments, groups).to_torch("cpu")


def random_attention(alignment, generator) -> WordAttention:
    """Random maps for every window of the alignment, in one bucket as wide as its widest window."""
    n_windows, n_positions = int(alignment.block_window.max()) + 1, alignment.rows.shape[-1]
    maps = torch.rand(n_windows, N_MAPS, n_positions, n_positions, generator=generator)
    return WordAttention([[maps]], alignment)


def scorer_inputs(alignment, generator):
    """(hidden, attention, missing, unshared) as PooledPairScorer.pooled gives them."""
    mask = alignment.mask
    hidden = torch.randn(alignment.n_groups, alignment.n_units, WIDTH, generator=generator)
    unshared = (alignment.shared == 0) * mask[:, :, None] * mask[:, None, :]
    return hidden, random_attention(alignment, generator), alignment.missing, unshared


def relation_scorer(slice_values: int, dropout: float = 0.0) -> RelationPairScorer:
    torch.manual_seed(0)
    scorer = RelationPairScorer(WIDTH, N_MAPS, N_LABELS, True, True, dropout, HIDDEN_WIDTH, slice_values)
    for parameter in scorer.parameters():  # the trained-from-zero ones too, so every term counts
        torch.nn.init.normal_(parameter)
    return scorer


def test_entities_in_separate_windows_pool_in_proportion_to_the_entities():
    """Per-window blocks of 2 units (root + the entity) and 3n + 1 shared pairs, not (n + 1)^2 x windows."""
    generator = torch.Generator().manual_seed(0)
    for n in (50, 100, 200):
        alignment = separate_windows(n)
        assert alignment.rows.shape == alignment.cols.shape == alignment.hidden_weights.shape == (n, 2, 6)
        attention = random_attention(alignment, generator)
        slots, values = attention.project_shared(torch.rand(5, N_MAPS, generator=generator))
        assert values.shape == (3 * n + 1, 5)  # the root with itself, and root-entity, entity-root, entity-entity
        head, tail = slots // (n + 1), slots % (n + 1)
        assert ((head == 0) | (tail == 0) | (head == tail)).all()  # no pair of two entities


@settings(max_examples=100, deadline=None)
@given(batches())
def test_the_projection_at_shared_pairs_is_the_dense_projection_where_it_is_not_zero(batch):
    hidden, attentions, docs, windows, sentences, window_order = batch
    groups = Groups.sentences(*np.array(sentences).T)
    _, words, alignment = pooled(hidden, attentions, docs, windows, groups, window_order)
    weights = torch.randn(2, words.n_maps, dtype=torch.float64)
    slots, values = words.project_shared(weights)
    dense = words.project(weights).permute(0, 2, 3, 1).reshape(-1, 2)  # row g * N * N + i * N + j
    shared = alignment.shared.reshape(-1) > 0
    assert torch.equal(slots, torch.nonzero(shared).flatten())
    torch.testing.assert_close(values, dense[slots])
    assert (dense[~shared] == 0).all()


class LargestTensor(TorchDispatchMode):
    """Records the most elements of any tensor an operation returns while it is active."""

    def __init__(self):
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        tensors = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
        self.numel = max([self.numel, *(t.numel() for t in tensors)])
        return result


@pytest.mark.parametrize("training", [False, True])
def test_the_scorer_holds_nothing_larger_than_its_scores(training):
    """The pairs' hidden layer (16 values a pair here) and attention projection (32) exist only in slices
    and at shared pairs, so the largest tensor is the (1, N, N, 1 + K) scores, forward and backward."""
    generator = torch.Generator().manual_seed(1)
    alignment = separate_windows(120)
    scorer = relation_scorer(slice_values=2**12, dropout=0.1).train(training)
    hidden, attention, missing, unshared = scorer_inputs(alignment, generator)
    attention.window_maps[0][0].requires_grad_(training)
    with torch.set_grad_enabled(training), LargestTensor() as largest:
        scores = scorer(hidden, attention, missing, unshared)
        if training:
            scores.sum().backward()
    assert scores.shape == (1, 121, 121, 1 + N_LABELS)
    assert largest.numel == scores.numel()
    if training:
        assert attention.window_maps[0][0].grad is not None and scorer.attention.forward_map.grad.abs().sum() > 0


def test_training_keeps_no_pair_activations_for_the_backward_pass():
    """Checkpointed slices: autograd keeps the slices' inputs (per unit, per shared pair, and the
    unshared indicator), less than the scores, instead of 16 hidden values a pair."""
    generator = torch.Generator().manual_seed(2)
    alignment = separate_windows(120)
    scorer = relation_scorer(slice_values=2**12, dropout=0.1).train()
    kept = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        scores = scorer(*scorer_inputs(alignment, generator))
    assert sum(kept.values()) < scores.numel() * scores.element_size()


def dense_relation_scores(scorer: RelationPairScorer, hidden, attention: WordAttention, missing, unshared):
    """The scorer's formula on whole (B, N, N, H) tensors, attention from the dense maps (the old path)."""
    maps = attention.dense()  # (B, F, N, N)
    forward_map, backward_map = scorer.attention.forward_map, scorer.attention.backward_map
    pairs = (
        scorer.bias
        + scorer.indicators(missing, unshared)
        + scorer.parts["head"](hidden)[:, :, None]
        + scorer.parts["tail"](hidden)[:, None, :]
        + scorer.parts["context"](hidden[:, :1])[:, :, None]
        + torch.einsum("cf,bfij->bijc", forward_map, maps)
        + torch.einsum("cf,bfji->bijc", backward_map, maps)
    )
    return scorer.output(pairs)


def test_sliced_scores_and_gradients_equal_the_dense_computation():
    """Two Docs; windows shared by some entities and not others; an entity without wordpieces and one
    with two mentions; every slice size from one head entity a slice to all at once."""
    windows = [(3, 6), (2, 5)]
    tokens = [[1], [2], [3], [7], [8, 9], [], [13], [14]], [[1], [2, 3], [6], [7], [8]]
    lengths = [np.array([len(t) for t in doc]) for doc in tokens]
    indices = [np.array([i for t in doc for i in t], dtype="int64") for doc in tokens]
    alignment = align_blocks(
        DocAlignments.from_docs(lengths, indices, windows),
        entity_groups([[[(0, 1)], [(1, 3), (6, 7)], [(3, 4)], [(4, 5)], [(5, 6)], [(7, 8)]], [[(0, 1)], [(2, 5)]]]),
    ).to_torch("cpu")
    assert alignment.missing.sum() == 1 and (alignment.shared[0, 1:, 1:] == 0).any()
    generator = torch.Generator().manual_seed(3)
    hidden, attention, missing, unshared = scorer_inputs(alignment, generator)
    hidden.requires_grad_(True)
    attention.window_maps[0][0].requires_grad_(True)
    expected = dense_relation_scores(relation_scorer(2**30), hidden, attention, missing, unshared)
    expected_grads = torch.autograd.grad(expected.sum(), (hidden, attention.window_maps[0][0]))
    for slice_values in (1, 3 * 7 * HIDDEN_WIDTH, 2**30):
        scores = relation_scorer(slice_values)(hidden, attention, missing, unshared)
        torch.testing.assert_close(scores, expected)
        grads = torch.autograd.grad(scores.sum(), (hidden, attention.window_maps[0][0]))
        for grad, expected_grad in zip(grads, expected_grads):
            torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-5)  # float32, sums in another order


def test_relation_arrays_are_stored_as_set_relations_stores_them():
    doc = spacy.blank("en")("a b c d e f g")
    rng = np.random.default_rng(0)
    labels = ("zeta", "alpha", "mid")
    heads = rng.integers(0, 3, size=(40, 1)) + np.array([[0, 1]])
    tails = rng.integers(3, 6, size=(40, 1)) + np.array([[0, 2]])
    label_ids, scores = rng.integers(0, 3, size=40), rng.random(40).astype("float32")
    set_relation_arrays(doc, heads, tails, label_ids, scores, labels)
    stored = doc.user_data[USER_DATA_KEY]
    set_relations(doc, [Relation(tuple(h), tuple(t), labels[k], float(s)) for h, t, k, s in zip(
        heads.tolist(), tails.tolist(), label_ids, scores)])  # fmt: skip
    assert stored == doc.user_data[USER_DATA_KEY]
    with pytest.raises(ValueError, match=r"tail span \[5, 8\) of relation 'mid' does not fit the Doc of 7 tokens"):
        set_relation_arrays(doc, [[0, 1]], [[5, 8]], [2], [0.5], labels)


@pytest.fixture(scope="module")
def relation_nlp(tiny_bert_dir):
    """transformer (tiny random BERT, windows of one sentence) + pairatt_rel with max_pairs_per_doc = 12,
    initialized (untrained)."""
    fix_random_seed(0)
    nlp = make_transformer_pipeline(tiny_bert_dir)
    nlp.add_pipe("pairatt_rel", config={"max_pairs_per_doc": 12})
    doc = sentences_doc(nlp, 2)
    doc._.relations = [(doc.ents[0], doc.ents[1], "near")]
    nlp.initialize(lambda: [Example(sentences_doc(nlp, 2), doc)])
    return nlp


def sentences_doc(nlp, n_entities: int) -> Doc:
    """The issue's Doc: n 4-token sentences, the first token of each an entity."""
    words = [word for i in range(n_entities) for word in (f"Place{i}", "is", "near", ".")]
    doc = Doc(nlp.vocab, words=words, sent_starts=[i % 4 == 0 for i in range(len(words))])
    doc.ents = [Span(doc, i, i + 1, "LOC") for i in range(0, len(words), 4)]
    return doc


def test_max_pairs_per_doc_is_checked_at_construction(tiny_bert_dir):
    nlp = make_transformer_pipeline(tiny_bert_dir)
    with pytest.raises(ValueError, match=r"pairatt_rel: max_pairs_per_doc must be an integer >= 2, got 1\b"):
        nlp.add_pipe("pairatt_rel", config={"max_pairs_per_doc": 1})


def test_a_doc_over_max_pairs_per_doc_is_an_error_naming_it(relation_nlp):
    """4 entities are 12 ordered pairs (allowed), 5 are 20; in prediction and in training."""
    assert len(relation_nlp(sentences_doc(relation_nlp, 4)).ents) == 4
    message = (
        r"pairatt_rel: Doc 1 of the batch \(20 tokens, 'Place0 is near \. Place1.*'\) has 5 candidate entities in "
        r"doc\.ents, 20 ordered pairs to score, more than max_pairs_per_doc = 12\..*max_pairs_per_doc"
    )
    with pytest.raises(ValueError, match=message):
        list(relation_nlp.pipe([sentences_doc(relation_nlp, 2), sentences_doc(relation_nlp, 5)], batch_size=2))
    reference = sentences_doc(relation_nlp, 5)
    reference._.relations = [(reference.ents[0], reference.ents[1], "near")]
    with pytest.raises(ValueError, match=message.replace("Doc 1", "Doc 0")):
        relation_nlp.get_pipe("pairatt_rel").update([Example(sentences_doc(relation_nlp, 5), reference)])


def test_max_pairs_per_doc_given_at_load_time_is_the_one_that_runs(relation_nlp, tmp_path):
    relation_nlp.to_disk(tmp_path / "nlp")
    nlp = spacy.load(tmp_path / "nlp", config={"components": {"pairatt_rel": {"max_pairs_per_doc": 2}}})
    assert nlp.config["components"]["pairatt_rel"]["max_pairs_per_doc"] == 2
    with pytest.raises(ValueError, match="3 candidate entities in doc.ents, 6 ordered pairs"):
        nlp(sentences_doc(nlp, 3))


def test_slicing_the_pairs_does_not_change_the_relations(relation_nlp):
    """The issue's Doc through the pipeline, all pairs in one slice and one head entity a slice."""
    scorer = torch_module(relation_nlp.get_pipe("pairatt_rel").model.get_ref("pair_scorer")).scorer
    doc = relation_nlp(sentences_doc(relation_nlp, 3))
    default, scorer.slice_values = scorer.slice_values, 1
    try:
        sliced = relation_nlp(sentences_doc(relation_nlp, 3))
    finally:
        scorer.slice_values = default
    relations, sliced_relations = doc._.relations, sliced._.relations
    assert len(relations) > 0
    assert [(r.head, r.tail, r.label) for r in sliced_relations] == [(r.head, r.tail, r.label) for r in relations]
    np.testing.assert_allclose([r.score for r in sliced_relations], [r.score for r in relations], rtol=1e-5)
