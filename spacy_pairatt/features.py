"""Pair features of eq. 5 for every sentence of a batch: T (units x M) and a (L*H x units x units).

The pair scorer never sees the N x N x (2M + 2LH) concatenation: it gets the word vectors and the
attention maps separately and sums per-part linear maps (see `layers.pair_scorer`).
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
from spacy.tokens import Doc
from thinc.api import to_numpy

from .alignment import UnitAlignment, align_units, pool_attention, pool_hidden, pool_hidden_backward
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
class SentenceFeatures:
    """Units of one sentence (0 = root, 1..n = words doc[start:start+n]) and their features."""

    doc_index: int
    start: int
    alignment: UnitAlignment
    hidden: np.ndarray  # (n+1, M)
    attention: Optional[np.ndarray]  # (L*H, n+1, n+1) or None when attention is not used
    shared: Optional[np.ndarray]  # (n+1, n+1) windows shared by each pair

    @property
    def n_words(self) -> int:
        return self.hidden.shape[0] - 1


@dataclass
class PairBatch:
    """Sentences padded to a common number of units N, the scorer's input.

    hidden (B, N, M); attention (B, L*H, N, N) or None; missing (B, N) 1.0 for units without
    wordpieces; unshared (B, N, N) 1.0 for pairs with no common window; mask (B, N) 1.0 for real
    units (root included).
    """

    hidden: np.ndarray
    attention: Optional[np.ndarray]
    missing: np.ndarray
    unshared: np.ndarray
    mask: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return self.mask.sum(axis=1).astype("int64")


def doc_sentences(doc: Doc) -> List[Tuple[int, int]]:
    """(start, end) token offsets of the units the parser decodes as one tree each.

    The Doc's sentence boundaries when it has them (a sentencizer, senter or the data set them),
    else the whole Doc is one sentence.
    """
    return [(span.start, span.end) for span in sentence_spans(doc)]


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


def sentence_features(docs: List[Doc], trf_datas, use_attention: bool) -> List[SentenceFeatures]:
    """Features for every sentence of every Doc, in Doc order."""
    features: List[SentenceFeatures] = []
    for doc_index, (doc, trf_data) in enumerate(zip(docs, trf_datas)):
        sentences = doc_sentences(doc)
        if not sentences:
            continue
        arrays = trf_arrays(trf_data, use_attention)
        if arrays is None:
            raise ValueError(f"pairatt: Doc {doc_index} ({len(doc)} tokens) has no transformer output")
        hidden, attentions, lengths, indices = arrays
        if len(lengths) != len(doc):
            raise ValueError(
                f"pairatt: the transformer alignment covers {len(lengths)} tokens but Doc {doc_index} "
                f"has {len(doc)}; the Doc was changed after the transformer ran"
            )
        for start, end in sentences:
            alignment = align_units(lengths, indices, hidden.shape[1], start, end)
            attention = shared = None
            if use_attention:
                attention, shared = pool_attention(attentions, alignment)
            features.append(
                SentenceFeatures(doc_index, start, alignment, pool_hidden(hidden, alignment), attention, shared)
            )
    return features


def pad_batch(features: List[SentenceFeatures], width: int, n_attention: int) -> PairBatch:
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
    return PairBatch(hidden, attention, missing, unshared, mask)


def hidden_gradients(
    d_hidden_units: List[np.ndarray],
    features: List[SentenceFeatures],
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
