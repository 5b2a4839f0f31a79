"""What the parser and relation models share: score padded chunks of units, send gradients back.

A *group* is what one pair-score matrix covers: a sentence's words for the parser, a Doc's
entities for relations. Groups are scored in chunks of similar size, and the gradient of each
unit's pooled hidden state goes back to the shared transformer's `last_hidden_state`, and, when
asked for, the gradient of the word-level attention to the transformer's `attentions`.
"""

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy as np
from spacy_transformers.data_classes import TransformerData
from thinc.api import Model
from transformers.file_utils import ModelOutput

from ..features import UnitFeatures, attention_gradients, hidden_gradients, pad_batch


def length_chunks(lengths: List[int], max_pairs: int) -> List[List[int]]:
    """Indices grouped by length so that chunk size x longest length squared stays under max_pairs.

    Padding every group to the longest one of a whole batch makes memory grow with
    batch size x longest group squared; chunks keep it bounded.
    """
    order = np.argsort(lengths, kind="stable")
    chunks: List[List[int]] = [[]]
    for index in order:
        if chunks[-1] and (len(chunks[-1]) + 1) * lengths[index] ** 2 > max_pairs:
            chunks.append([])
        chunks[-1].append(int(index))
    return [chunk for chunk in chunks if chunk]


@dataclass
class UnitGradients:
    """What the pair scorer's backprop gives each group, in group order.

    hidden: (N, M) gradient of the unit vectors per group; attention: (L*H, N, N) gradient of
    the word-level attention per group, or None when attention gradients were not asked for.
    """

    hidden: List[np.ndarray]
    attention: Optional[List[np.ndarray]] = None


def score_chunks(
    scorer: Model, features: List[UnitFeatures], max_pairs: int, is_train: bool, attention_requires_grad: bool = False
) -> Tuple[List[Tuple[List[int], np.ndarray, np.ndarray]], Callable[[List[np.ndarray]], UnitGradients]]:
    """[(group indices, scores (B, N, N, C), mask (B, N))] per chunk, and the backprop.

    The backprop takes one d_scores array per chunk and returns the groups' UnitGradients; their
    attention gradients only when attention_requires_grad (and the groups carry attention).
    """
    with_attention = attention_requires_grad and any(f.attention is not None for f in features)
    chunks = length_chunks([f.n_units for f in features], max_pairs)
    outputs, backprops = [], []
    for chunk in chunks:
        batch = pad_batch([features[i] for i in chunk], scorer.get_dim("nI"), scorer.get_dim("nA"), with_attention)
        scores, backprop_scores = scorer(batch, is_train)
        outputs.append((chunk, scores, batch.mask))
        backprops.append(backprop_scores)

    def backprop(d_scores: List[np.ndarray]) -> UnitGradients:
        d_hidden: List[Optional[np.ndarray]] = [None] * len(features)
        d_attention: List[Optional[np.ndarray]] = [None] * len(features)
        for chunk, backprop_scores, d_chunk in zip(chunks, backprops, d_scores):
            d_batch = backprop_scores(d_chunk)
            for row, index in enumerate(chunk):
                d_hidden[index] = d_batch.hidden[row]
                if with_attention:
                    d_attention[index] = d_batch.attention[row]
        return UnitGradients(d_hidden, d_attention if with_attention else None)

    return outputs, backprop


def transformer_gradients(
    model: Model, trf_datas: List[TransformerData], features: List[UnitFeatures], d_units: UnitGradients
) -> List[TransformerData]:
    """TransformerData gradients for the listener, scaled by grad_factor: d last_hidden_state, and
    d attentions (one array per layer) when d_units carries attention gradients."""
    outputs = [trf.model_output if "last_hidden_state" in trf.model_output else None for trf in trf_datas]
    d_hidden = hidden_gradients(
        d_units.hidden, features, [None if output is None else output["last_hidden_state"].shape for output in outputs]
    )
    d_attentions: List[Optional[List[np.ndarray]]] = [None] * len(trf_datas)
    if d_units.attention is not None:
        attention_shapes = [
            None if output is None else [layer.shape for layer in output["attentions"]] for output in outputs
        ]
        d_attentions = attention_gradients(d_units.attention, features, attention_shapes)
    return [
        TransformerData(
            wordpieces=trf_data.wordpieces,
            model_output=_gradient_output(model, d_doc, d_doc_attentions),
            align=trf_data.align,
        )
        for trf_data, d_doc, d_doc_attentions in zip(trf_datas, d_hidden, d_attentions)
        if d_doc is not None
    ]


def _gradient_output(model: Model, d_hidden: np.ndarray, d_attentions: Optional[List[np.ndarray]]) -> ModelOutput:
    grad_factor = model.attrs["grad_factor"]
    output = ModelOutput(last_hidden_state=model.ops.asarray(d_hidden * grad_factor))
    if d_attentions is not None:
        output["attentions"] = [model.ops.asarray(d_layer * grad_factor) for d_layer in d_attentions]
    return output
