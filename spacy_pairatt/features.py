"""Pair features of eq. 5 for every sentence of a batch: T (units x M) and a (L*H x units x units).

The pair scorer never sees the N x N x (2M + 2LH) concatenation: it gets the word vectors and the
attention maps separately and sums per-part linear maps (see `layers.pair_scorer`).
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
from spacy.tokens import Doc
from thinc.api import to_numpy

from .alignment import (
    UnitAlignment,
    align_token_groups,
    align_units,
    pool_attention,
    pool_attention_backward,
    pool_hidden,
    pool_hidden_backward,
)
from .span_getters import sentence_spans

ATTENTION_CONFIG_HINT = (
    "Set these in the transformer's config:\n"
    "[components.transformer.model.transformer_config]\n"
    "output_attentions = true\n"
    'attn_implementation = "eager"'
)


class MissingAttentionError(ValueError):
    """The upstream transformer does not output attention weights."""


@dataclass
class UnitFeatures:
    """Units of one scored group (unit 0 = root, 1..n = a sentence's words or a Doc's entities)."""

    doc_index: int
    alignment: UnitAlignment
    hidden: np.ndarray  # (n+1, M)
    attention: Optional[np.ndarray]  # (L*H, n+1, n+1) or None when attention is not used
    shared: Optional[np.ndarray]  # (n+1, n+1) windows shared by each pair

    @property
    def n_units(self) -> int:
        return self.hidden.shape[0]


@dataclass
class PairBatch:
    """Sentences padded to a common number of units N, the scorer's input.

    hidden (B, N, M); attention (B, L*H, N, N) or None; missing (B, N) 1.0 for units without
    wordpieces; unshared (B, N, N) 1.0 for pairs with no common window; mask (B, N) 1.0 for real
    units (root included). attention_requires_grad: the scorer's backprop returns the gradient of
    the attention too (only worth its cost when the transformer is fine-tuned through attention).
    """

    hidden: np.ndarray
    attention: Optional[np.ndarray]
    missing: np.ndarray
    unshared: np.ndarray
    mask: np.ndarray
    attention_requires_grad: bool = False

    @property
    def lengths(self) -> np.ndarray:
        return self.mask.sum(axis=1).astype("int64")


# A longer sentence is parsed as consecutive pieces of nearly equal length, one tree each: the
# pair features of an n-token unit are n x n per layer and head, and a 10,000-token Doc without
# sentence boundaries would need tens of GB. EWT's longest sentence has 159 tokens.
MAX_SENTENCE_TOKENS = 256


def doc_sentences(doc: Doc) -> List[Tuple[int, int]]:
    """(start, end) token offsets of the units the parser decodes as one tree each.

    The Doc's sentence boundaries when it has them (a sentencizer, senter or the data set them),
    else the whole Doc is one sentence; a sentence over MAX_SENTENCE_TOKENS is cut into pieces.
    """
    units = []
    for span in sentence_spans(doc):
        n_pieces = -(-len(span) // MAX_SENTENCE_TOKENS)
        bounds = span.start + (np.arange(n_pieces + 1) * len(span)) // max(n_pieces, 1)
        units.extend(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    return units


def trf_arrays(trf_data, use_attention: bool):
    """(hidden (W, P, M), attentions list or None, align lengths, align indices) of one Doc.

    Copied to numpy: alignment and pooling run on the CPU whatever device the transformer uses.
    """
    output = trf_data.model_output
    if "last_hidden_state" not in output:
        return None
    hidden = to_numpy(output["last_hidden_state"])
    attentions = None
    if use_attention:
        if not output.get("attentions"):
            raise MissingAttentionError(
                "pairatt: Doc._.trf_data has no attention weights, so the upstream transformer was "
                "run without them.\n" + ATTENTION_CONFIG_HINT
            )
        attentions = [to_numpy(layer) for layer in output["attentions"]]
    return hidden, attentions, to_numpy(trf_data.align.lengths), to_numpy(trf_data.align.dataXd)


def doc_arrays(doc_index: int, doc: Doc, trf_data, use_attention: bool):
    """`trf_arrays` of one Doc, checked against the Doc's tokens."""
    arrays = trf_arrays(trf_data, use_attention)
    if arrays is None:
        raise ValueError(f"pairatt: Doc {doc_index} ({len(doc)} tokens) has no transformer output")
    lengths = arrays[2]
    if len(lengths) != len(doc):
        raise ValueError(
            f"pairatt: the transformer alignment covers {len(lengths)} tokens but Doc {doc_index} "
            f"has {len(doc)}; the Doc was changed after the transformer ran"
        )
    return arrays


def unit_features(doc_index: int, arrays, alignment: UnitAlignment) -> UnitFeatures:
    """Pooled hidden states and, when the arrays carry attention, word-level attention of the units."""
    hidden, attentions = arrays[:2]
    attention = shared = None
    if attentions is not None:
        attention, shared = pool_attention(attentions, alignment)
    return UnitFeatures(doc_index, alignment, pool_hidden(hidden, alignment), attention, shared)


def sentence_features(
    docs: List[Doc], trf_datas, use_attention: bool
) -> Tuple[List[UnitFeatures], List[Tuple[int, int, int]]]:
    """Features for every sentence of every Doc, in Doc order, and (doc index, start, n words) of each."""
    features: List[UnitFeatures] = []
    sentences: List[Tuple[int, int, int]] = []
    for doc_index, (doc, trf_data) in enumerate(zip(docs, trf_datas)):
        spans = doc_sentences(doc)
        if not spans:
            continue
        arrays = doc_arrays(doc_index, doc, trf_data, use_attention)
        hidden, _, lengths, indices = arrays
        for start, end in spans:
            alignment = align_units(lengths, indices, hidden.shape[1], start, end)
            features.append(unit_features(doc_index, arrays, alignment))
            sentences.append((doc_index, start, end - start))
    return features, sentences


def entity_features(
    docs: List[Doc], trf_datas, entities: List[List[List[Tuple[int, int]]]], use_attention: bool
) -> List[UnitFeatures]:
    """Features of the entities of every Doc that has at least two (so at least one pair).

    entities[d] lists Doc d's entities, each a list of mention offsets (start, end). An entity's
    vector is the mean over the wordpieces of all its mentions; its attention to another entity
    is the mean over its own wordpieces of the attention summed over the other's wordpieces, so
    both directions of a pair are pooled over all token pairs of the two entities.
    """
    features: List[UnitFeatures] = []
    for doc_index, (doc, trf_data, doc_entities) in enumerate(zip(docs, trf_datas, entities)):
        if len(doc_entities) < 2:
            continue
        arrays = doc_arrays(doc_index, doc, trf_data, use_attention)
        tokens = [np.arange(start, end) for mentions in doc_entities for start, end in mentions]
        units = [
            np.full(end - start, unit) for unit, mentions in enumerate(doc_entities, start=1) for start, end in mentions
        ]
        alignment = align_token_groups(
            arrays[2], arrays[3], arrays[0].shape[1], np.concatenate(tokens), np.concatenate(units)
        )
        features.append(unit_features(doc_index, arrays, alignment))
    return features


def pad_batch(
    features: List[UnitFeatures], width: int, n_attention: int, attention_requires_grad: bool = False
) -> PairBatch:
    """Stack (at least one) sentences into padded arrays; attention is None when they carry none."""
    n_units = max(f.hidden.shape[0] for f in features)
    batch = len(features)
    hidden = np.zeros((batch, n_units, width), dtype="float32")
    missing = np.zeros((batch, n_units), dtype="float32")
    unshared = np.zeros((batch, n_units, n_units), dtype="float32")
    mask = np.zeros((batch, n_units), dtype="float32")
    use_attention = features[0].attention is not None
    attention = np.zeros((batch, n_attention, n_units, n_units), dtype="float32") if use_attention else None
    for b, feats in enumerate(features):
        n = feats.hidden.shape[0]
        hidden[b, :n] = feats.hidden
        missing[b, :n] = ~feats.alignment.has_wordpieces
        mask[b, :n] = 1.0
        if use_attention:
            attention[b, :, :n, :n] = feats.attention
            unshared[b, :n, :n] = feats.shared == 0
    return PairBatch(hidden, attention, missing, unshared, mask, attention_requires_grad and use_attention)


def hidden_gradients(
    d_hidden_units: List[np.ndarray],
    features: List[UnitFeatures],
    hidden_shapes: List[Optional[Tuple[int, ...]]],
) -> List[Optional[np.ndarray]]:
    """Per-Doc gradients of the last hidden state from each sentence's padded (N, M) unit gradients.

    None for Docs without transformer output; zeros for Docs whose sentences got no gradient.
    """
    d_docs: List[Optional[np.ndarray]] = [
        None if shape is None else np.zeros(shape, dtype="float32") for shape in hidden_shapes
    ]
    for b, feats in enumerate(features):
        n = feats.hidden.shape[0]
        d_docs[feats.doc_index] += pool_hidden_backward(
            d_hidden_units[b][:n], feats.alignment, hidden_shapes[feats.doc_index]
        )
    return d_docs


def attention_gradients(
    d_attention_units: List[np.ndarray],
    features: List[UnitFeatures],
    attention_shapes: List[Optional[List[Tuple[int, ...]]]],
) -> List[Optional[List[np.ndarray]]]:
    """Per-Doc gradients of the attentions (one (W, H, P, P) array per layer) from each group's
    padded (L*H, N, N) gradient of its word-level attention.

    None for Docs without transformer output; zeros for Docs whose groups got no gradient.
    """
    d_docs: List[Optional[List[np.ndarray]]] = [
        None if shapes is None else [np.zeros(shape, dtype="float32") for shape in shapes]
        for shapes in attention_shapes
    ]
    for d_units, feats in zip(d_attention_units, features):
        n, doc = feats.n_units, feats.doc_index
        pool_attention_backward(d_units[:, :n, :n], feats.alignment, attention_shapes[doc], out=d_docs[doc])
    return d_docs
