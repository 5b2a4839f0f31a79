"""Wordpiece -> unit pooling (torch, batched by block) against hand-computed values and a direct,
loop-by-loop reference computation."""

import numpy as np
import pytest
import spacy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc

from spacy_pairatt.core.alignment import DocAlignments, Groups, align_blocks
from spacy_pairatt.core.pooling import WordAttention, bucket_windows, pool_attention, pool_hidden
from spacy_pairatt.layers.pair_batch import borrowed_wordpieces, entity_groups


def ragged(token_wordpieces):
    lengths = np.array([len(w) for w in token_wordpieces])
    indices = np.array([i for w in token_wordpieces for i in w], dtype="int64")
    return lengths, indices


def pooled(hidden, attentions, doc_align, windows, groups, window_order=None):
    """(hidden (S, N, M), dense attention (S, F, N, N), alignment) of the groups, in float64.

    window_order: the order in which the Docs' windows are numbered and stored (default: Doc
    order), each Doc its own bucket, its F maps as F layers of one head.
    """
    order = list(range(len(windows))) if window_order is None else list(window_order)
    first_windows = np.zeros(len(windows), dtype="int64")
    first_windows[order] = np.cumsum([0] + [windows[d][0] for d in order])[:-1]
    alignments = DocAlignments.from_docs(
        [a[0] for a in doc_align], [a[1] for a in doc_align], windows, first_windows=first_windows
    )
    alignment = align_blocks(alignments, groups).to_torch("cpu")
    window_hidden = [torch.as_tensor(hidden[d], dtype=torch.float64) for d in order]
    window_attention = [list(torch.as_tensor(attentions[d], dtype=torch.float64).split(1, dim=1)) for d in order]
    alignment.rows, alignment.cols, alignment.hidden_weights = (
        t.double() for t in (alignment.rows, alignment.cols, alignment.hidden_weights)
    )
    attention = pool_attention(window_attention, alignment)
    return pool_hidden(window_hidden, alignment), attention, alignment


@pytest.fixture
def one_window():
    """[CLS] i don ' t [SEP]: "I" -> 1, "do" -> 2, "n't" -> 2,3,4 (shares "don"), "  " -> none."""
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(1, 6, 3))
    attention = rng.dirichlet(np.ones(6), size=(1, 1, 6))  # (W=1, F=1, P, P)
    return hidden, attention, ragged([[1], [2], [2, 3, 4], []])


def test_hidden_is_mean_of_wordpieces(one_window):
    hidden, attention, align = one_window
    units, _, alignment = pooled([hidden], [attention], [align], [(1, 6)], Groups.sentences([0], [0], [4]))
    units = units[0].numpy()
    np.testing.assert_allclose(units[0], hidden[0, 0])  # root = [CLS]
    np.testing.assert_allclose(units[1], hidden[0, 1])
    np.testing.assert_allclose(units[2], hidden[0, 2])
    np.testing.assert_allclose(units[3], hidden[0, 2:5].mean(axis=0))
    np.testing.assert_array_equal(units[4], 0)
    assert alignment.missing[0].tolist() == [0, 0, 0, 0, 1]


def test_attention_from_is_mean_and_to_is_sum(one_window):
    hidden, attention, align = one_window
    _, words, alignment = pooled([hidden], [attention], [align], [(1, 6)], Groups.sentences([0], [0], [4]))
    words = words.dense()[0, 0].numpy()
    a = attention[0, 0]
    assert words[3, 1] == pytest.approx(a[2:5, 1].mean())
    assert words[1, 3] == pytest.approx(a[1, 2:5].sum())
    assert words[2, 3] == pytest.approx(a[2, 2:5].sum())  # "don" counted for both words
    assert words[0, 2] == pytest.approx(a[0, 2])
    assert (words[4] == 0).all() and (words[:, 4] == 0).all()
    assert alignment.shared[0, 1, 3] == 1 and alignment.shared[0, 1, 4] == 0


def test_long_sentence_averages_over_shared_windows_only():
    """Two windows of 4 positions; words 1 and 2 are in both, word 0 only in the first, word 3 in the second."""
    rng = np.random.default_rng(3)
    hidden = rng.normal(size=(2, 4, 2))
    attention = rng.random(size=(2, 1, 4, 4))
    align = ragged([[1], [2, 5], [3, 6], [7]])
    units, words, alignment = pooled([hidden], [attention], [align], [(2, 4)], Groups.sentences([0], [0], [4]))
    words = words.dense()[0, 0].numpy()
    a = attention[:, 0]
    assert words[2, 3] == pytest.approx((a[0, 2, 3] + a[1, 1, 2]) / 2)
    assert words[1, 4] == 0 and alignment.shared[0, 1, 4] == 0  # no common window
    assert words[0, 1] == pytest.approx(a[0, 0, 1])  # the root is in both windows: only window 0 holds word 1
    np.testing.assert_allclose(units[0, 0].numpy(), (hidden[0, 0] + hidden[1, 0]) / 2)
    np.testing.assert_allclose(units[0, 2].numpy(), (hidden[0, 2] + hidden[1, 1]) / 2)


def test_entity_with_two_mentions_pools_over_all_their_wordpieces():
    """Relation units: an entity is all wordpieces of all its mentions (mean as source, sum as target)."""
    rng = np.random.default_rng(1)
    hidden = rng.normal(size=(1, 8, 3))
    attention = rng.dirichlet(np.ones(8), size=(1, 2, 8))  # (W=1, F=2, P, P)
    # tokens 0..4 -> wordpieces [1], [2, 3], [4], [5], [6]; entity A = tokens 0 and 3 (two mentions),
    # entity B = token 1 (two wordpieces), token 2 and 4 belong to no entity.
    align = ragged([[1], [2, 3], [4], [5], [6]])
    groups = entity_groups([[[(0, 1), (3, 4)], [(1, 2)]]])
    units, words, _ = pooled([hidden], [attention], [align], [(1, 8)], groups)
    np.testing.assert_allclose(units[0, 1].numpy(), hidden[0, [1, 5]].mean(axis=0))
    np.testing.assert_allclose(units[0, 2].numpy(), hidden[0, [2, 3]].mean(axis=0))
    words = words.dense()[0].numpy()
    for head in range(2):
        a = attention[0, head]
        assert words[head, 1, 2] == pytest.approx(a[[1, 5]][:, [2, 3]].sum(axis=1).mean())
        assert words[head, 2, 1] == pytest.approx(a[[2, 3]][:, [1, 5]].sum(axis=1).mean())


def reference(hidden, attentions, doc_align, windows, sentences):
    """The pooling rules computed directly, one group, unit and window at a time (no shared code)."""
    results = []
    for doc, start, n_words in sentences:
        lengths, indices = doc_align[doc]
        n_windows, width = windows[doc]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        pieces = [set()] + [
            {(int(i) // width, int(i) % width) for i in indices[offsets[t] : offsets[t + 1]]}
            for t in range(start, start + n_words)
        ]
        touched = sorted({w for unit in pieces for w, _ in unit})
        pieces[0] = {(w, 0) for w in touched}
        n = n_words + 1
        pooled_hidden = np.zeros((n, hidden[doc].shape[-1]))
        for u, unit in enumerate(pieces):
            if unit:
                pooled_hidden[u] = np.mean([hidden[doc][w, p] for w, p in unit], axis=0)
        n_maps = attentions[doc].shape[1]
        pooled_attention = np.zeros((n_maps, n, n))
        shared = np.zeros((n, n))
        for i in range(n):
            for j in range(n):
                for w in touched:
                    rows = [p for ww, p in pieces[i] if ww == w]
                    cols = [p for ww, p in pieces[j] if ww == w]
                    if rows and cols:
                        shared[i, j] += 1
                        pooled_attention[:, i, j] += attentions[doc][w][:, rows][:, :, cols].sum(axis=2).mean(axis=1)
        pooled_attention /= np.maximum(shared, 1)
        results.append((pooled_hidden, pooled_attention, shared, [float(not unit) for unit in pieces]))
    return results


@st.composite
def batches(draw):
    """Docs of different window counts and widths, their windows stored in a random order; tokens
    with no, one or several wordpieces, some shared between tokens (many-to-many), over several
    windows; one or two random sentences of each Doc (two groups can read the same window)."""
    n_docs = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    docs, windows, sentences = [], [], []
    for doc in range(n_docs):
        n_windows, width, n_tokens = int(rng.integers(1, 4)), int(rng.integers(3, 7)), int(rng.integers(1, 9))
        token_pieces = [
            [int(w * width + rng.integers(1, width)) for w in rng.integers(0, n_windows, size=rng.integers(0, 3))]
            for _ in range(n_tokens)
        ]
        docs.append(ragged(token_pieces))
        windows.append((n_windows, width))
        for _ in range(int(rng.integers(1, 3))):
            start = int(rng.integers(0, n_tokens))
            sentences.append((doc, start, int(rng.integers(0, n_tokens - start + 1))))
    hidden = [rng.normal(size=(w, p, 3)) for w, p in windows]
    attentions = [rng.random(size=(w, 4, p, p)) for w, p in windows]
    return hidden, attentions, docs, windows, sentences, rng.permutation(n_docs)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_batched_pooling_equals_the_direct_computation(batch):
    hidden, attentions, docs, windows, sentences, window_order = batch
    groups = Groups.sentences(*np.array(sentences).T)
    units, words, alignment = pooled(hidden, attentions, docs, windows, groups, window_order)
    dense = words.dense()
    for g, (expected_hidden, expected_attention, expected_shared, expected_missing) in enumerate(
        reference(hidden, attentions, docs, windows, sentences)
    ):
        n = len(expected_hidden)
        np.testing.assert_allclose(units[g, :n].numpy(), expected_hidden, atol=1e-5)
        np.testing.assert_allclose(dense[g, :, :n, :n].numpy(), expected_attention, atol=1e-5)
        np.testing.assert_array_equal(alignment.shared[g, :n, :n].numpy(), expected_shared)
        assert alignment.missing[g, :n].tolist() == expected_missing
    # What the scorer reads without the dense maps: projections (fewer outputs than maps project the
    # wordpiece maps first, more pool first; shared or per-group weights) and the maps at chosen pairs.
    n_groups, n_maps = dense.shape[:2]
    for shape in ((2, n_maps), (6, n_maps), (n_groups, 2, n_maps), (n_groups, 6, n_maps)):
        weights = torch.randn(*shape, dtype=torch.float64)
        equation = "cf,sfij->scij" if len(shape) == 2 else "scf,sfij->scij"
        expected = torch.einsum(equation, weights, dense)
        torch.testing.assert_close(words.project(weights), expected)
    heads = torch.randint(0, dense.shape[-1], (dense.shape[0], dense.shape[-1]))
    to_head, from_head = words.at_pairs(heads)
    s, i = torch.meshgrid(torch.arange(dense.shape[0]), torch.arange(dense.shape[-1]), indexing="ij")
    torch.testing.assert_close(to_head, dense.permute(0, 2, 3, 1)[s, i, heads])
    torch.testing.assert_close(from_head, dense.permute(0, 2, 3, 1)[s, heads, i])


@settings(max_examples=60, deadline=None)
@given(batches())
def test_chunks_of_a_batch_share_its_bucket_projections(batch):
    """Projections kept in a batch's `projected` under a key (fixed weights, inference) give each chunk
    what projecting alone gives, and every bucket is projected once for all the chunks."""
    hidden, attentions, docs, windows, sentences, window_order = batch
    groups = Groups.sentences(*np.array(sentences).T)
    half = max(1, len(sentences) // 2)
    chunks = [chunk for chunk in (list(range(half)), list(range(half, len(sentences)))) if chunk]
    weights = torch.randn(2, 4, dtype=torch.float64)
    projected, buckets_read = {}, set()
    for chunk in chunks:
        _, alone, alignment = pooled(hidden, attentions, docs, windows, groups.subset(chunk), window_order)
        shared = WordAttention(alone.window_maps, alignment, projected)
        torch.testing.assert_close(shared.project(weights, "arcs"), alone.project(weights))
        torch.testing.assert_close(shared.project(2 * weights), 2 * alone.project(weights))  # no key: not kept
        buckets_read |= {bucket for bucket, _, _ in alone._bucket_blocks}
    assert sorted(projected) == sorted(("arcs", bucket) for bucket in buckets_read)


def test_gradients_match_finite_differences():
    """Autograd through the pooling (hidden and attention) against torch's finite differences."""
    rng = np.random.default_rng(5)
    windows = [(3, 5)]
    align = ragged([[11], [1, 2], [2, 3], [3, 6], [7], [], [8]])  # windows 0 and 1 of 0..2
    alignments = DocAlignments.from_docs([align[0]], [align[1]], windows)
    for groups in (Groups.sentences([0], [1], [6]), entity_groups([[[(1, 3)], [(3, 5), (6, 7)], [(0, 1)]]])):
        alignment = align_blocks(alignments, groups).to_torch("cpu")
        for name in ("rows", "cols", "hidden_weights"):
            setattr(alignment, name, getattr(alignment, name).double())
        # windows 0 and 1..2 in two buckets: hidden (W_b, P, M), attention 2 layers (W_b, 1 head, P, P)
        hidden = tuple(torch.tensor(rng.normal(size=(n, 5, 2)), requires_grad=True) for n in (1, 2))
        attention = tuple(torch.tensor(rng.random(size=(n, 1, 5, 5)), requires_grad=True) for n in (1, 1, 2, 2))

        def words(*maps):
            return pool_attention([maps[:2], maps[2:]], alignment)

        assert torch.autograd.gradcheck(lambda *h: pool_hidden(h, alignment), hidden)
        assert torch.autograd.gradcheck(lambda *a: words(*a).dense(), attention)
        for weights in (torch.randn(3, 2), torch.randn(1, 2), torch.randn(alignment.n_groups, 1, 2)):
            weights = weights.double()
            assert torch.autograd.gradcheck(lambda *a: words(*a).project(weights), attention)
        heads = torch.zeros(1, alignment.n_units, dtype=torch.int64)
        assert torch.autograd.gradcheck(lambda *a: words(*a).at_pairs(heads), attention)


def test_dense_attention_wraps_as_one_block_per_group():
    attention = torch.rand(2, 3, 4, 4)
    words = WordAttention.from_dense(attention)
    torch.testing.assert_close(words.dense(), attention)


def test_windows_are_bucketed_by_width_without_padding():
    """Docs of one width share a bucket, its layers kept apart; other widths get their own, unpadded."""
    hidden = [torch.full((1, 3, 2), 1.0), torch.full((1, 3, 2), 2.0), torch.full((2, 5, 2), 3.0)]
    layers = [
        [torch.full((len(h), 2, h.shape[1], h.shape[1]), 10.0 * d + layer) for layer in range(2)]
        for d, h in enumerate(hidden)
    ]
    layers[0][1][0, 1, 2, 0] = -1.0  # layer 1, head 1: position 2 attends to position 0
    window_hidden, attention = bucket_windows(hidden, layers)
    assert [tuple(b.shape) for b in window_hidden] == [(2, 3, 2), (2, 5, 2)]
    assert window_hidden[0][:, 0, 0].tolist() == [1.0, 2.0]
    assert [[tuple(layer.shape) for layer in bucket] for bucket in attention] == [
        [(2, 2, 3, 3)] * 2,
        [(2, 2, 5, 5)] * 2,
    ]
    assert attention[0][1][:, 0, 0, 0].tolist() == [1.0, 11.0] and attention[1][0][:, 0, 0, 0].tolist() == [20.0] * 2
    assert attention[0][1][0, 1, 2, 0] == -1.0
    assert bucket_windows(hidden)[1] is None


def test_views_of_one_transformer_pass_are_bucketed_without_a_copy():
    """Per-Doc numpy views that follow each other in memory (spacy-transformers' split of one pass)
    become one bucket viewing the same memory; a Doc from another pass starts a bucket of its own."""
    rng = np.random.default_rng(0)
    one_pass = rng.random((3, 4, 2)), [rng.random((3, 2, 4, 4)) for _ in range(2)]
    other_pass = rng.random((1, 4, 2)), [rng.random((1, 2, 4, 4)) for _ in range(2)]
    docs = [(one_pass[0][i : i + 1], [layer[i : i + 1] for layer in one_pass[1]]) for i in range(3)]
    docs.append((other_pass[0], other_pass[1]))
    window_hidden, attention = bucket_windows([hidden for hidden, _ in docs], [layers for _, layers in docs])
    assert [len(bucket) for bucket in window_hidden] == [3, 1]
    assert window_hidden[0].data_ptr() == one_pass[0].__array_interface__["data"][0]  # a view, not a copy
    assert attention[0][1].data_ptr() == one_pass[1][1].__array_interface__["data"][0]
    np.testing.assert_array_equal(window_hidden[0].numpy(), one_pass[0])
    np.testing.assert_array_equal(attention[0][1].numpy(), one_pass[1][1])
    np.testing.assert_array_equal(attention[1][0].numpy(), other_pass[1][0])
    # Out of memory order, a Doc that does not follow the one before starts a bucket of its own.
    shuffled = [docs[i] for i in (2, 0, 1)]
    window_hidden, attention = bucket_windows([h for h, _ in shuffled], [layers for _, layers in shuffled])
    assert [len(bucket) for bucket in window_hidden] == [1, 2]
    assert window_hidden[1].data_ptr() == one_pass[0].__array_interface__["data"][0]
    np.testing.assert_array_equal(attention[1][0].numpy(), one_pass[1][0][:2])
    # Arrays whose memory is not known to follow (here torch tensors) are copied into one bucket.
    as_torch = [(torch.as_tensor(h), [torch.as_tensor(layer) for layer in layers]) for h, layers in shuffled]
    window_hidden, attention = bucket_windows([h for h, _ in as_torch], [layers for _, layers in as_torch])
    assert [len(bucket) for bucket in window_hidden] == [3]
    np.testing.assert_array_equal(window_hidden[0].numpy(), one_pass[0][[2, 0, 1]])
    np.testing.assert_array_equal(attention[0][1].numpy(), one_pass[1][1][[2, 0, 1]])


def test_tokens_the_encoder_drops_share_the_wordpieces_before_them():
    """Zero-width, format and combining characters get no wordpiece from the encoder's tokenizer:
    such a token takes the previous word's (the next one's at the start); whitespace keeps none."""
    vocab = spacy.blank("en").vocab
    words = ["\u200b", "Caf", "\u0301", "  ", "\u200d\u200c", "ok", "\ufeff"]
    doc = Doc(vocab, words=words, spaces=[False, False, True, False, True, False, False])
    lengths = np.array([0, 2, 0, 0, 0, 1, 0])
    positions = np.array([1, 2, 3])  # Caf: 1, 2; ok: 3
    new_lengths, new_positions = borrowed_wordpieces(doc, lengths, positions)
    assert new_lengths.tolist() == [2, 2, 2, 0, 2, 1, 1]
    assert new_positions.tolist() == [1, 2, 1, 2, 1, 2, 1, 2, 3, 3]
    # a Doc where no token has a wordpiece keeps none: the scorer's placeholder stands in
    lone = Doc(vocab, words=["\u200b"], spaces=[False])
    assert [a.tolist() for a in borrowed_wordpieces(lone, np.array([0]), np.zeros(0, dtype="int64"))] == [[0], []]


def test_per_group_projection_gradients_where_sentences_share_windows():
    """Map dropout's per-group weights (S, C, F) on a window read by three sentences, one of them
    alone in another window: autograd to the maps and the weights against finite differences, and
    the values against the dense maps' projection."""
    rng = np.random.default_rng(7)
    windows = [(2, 5)]
    align = ragged([[1], [2], [3], [4], [6], [7], [8]])  # tokens 0..3 in window 0, 4..6 in window 1
    alignments = DocAlignments.from_docs([align[0]], [align[1]], windows)
    groups = Groups.sentences([0, 0, 0, 0], [0, 2, 3, 4], [2, 1, 1, 3])
    alignment = align_blocks(alignments, groups).to_torch("cpu")
    for name in ("rows", "cols", "hidden_weights"):
        setattr(alignment, name, getattr(alignment, name).double())
    assert len(alignment.block_window) == 4 and len(set(alignment.block_window.tolist())) == 2
    maps = tuple(torch.tensor(rng.random(size=(2, 1, 5, 5)), requires_grad=True) for _ in range(2))
    weights = torch.tensor(rng.normal(size=(4, 3, 2)), requires_grad=True)

    def projected(weights, *maps):
        return pool_attention([list(maps)], alignment).project(weights)

    dense = pool_attention([list(maps)], alignment).dense()
    torch.testing.assert_close(projected(weights, *maps), torch.einsum("scf,sfij->scij", weights, dense))
    assert torch.autograd.gradcheck(projected, (weights, *maps))
