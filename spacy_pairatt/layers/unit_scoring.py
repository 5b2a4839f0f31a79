"""What the parser and relation models share: score padded chunks of units, send gradients back.

A *group* is what one pair-score matrix covers: a sentence's words for the parser, a Doc's
entities for relations. Groups are scored in chunks of similar size, and the gradient of each
unit's pooled hidden state goes back to the shared transformer's `last_hidden_state`.
"""

from typing import Callable, List, Optional, Tuple

import numpy as np
from spacy_transformers.data_classes import TransformerData
from thinc.api import Model
from transformers.file_utils import ModelOutput

from ..features import UnitFeatures, hidden_gradients, pad_batch


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


def score_chunks(
    scorer: Model, features: List[UnitFeatures], max_pairs: int, is_train: bool
) -> Tuple[List[Tuple[List[int], np.ndarray, np.ndarray]], Callable]:
    """[(group indices, scores (B, N, N, C), mask (B, N))] per chunk, and the backprop.

    The backprop takes one d_scores array per chunk and returns each group's (N, M) gradient
    of its unit vectors, in group order.
    """
    chunks = length_chunks([f.n_units for f in features], max_pairs)
    outputs, backprops = [], []
    for chunk in chunks:
        batch = pad_batch([features[i] for i in chunk], scorer.get_dim("nI"), scorer.get_dim("nA"))
        scores, backprop_scores = scorer(batch, is_train)
        outputs.append((chunk, scores, batch.mask))
        backprops.append(backprop_scores)

    def backprop(d_scores: List[np.ndarray]) -> List[np.ndarray]:
        d_units: List[Optional[np.ndarray]] = [None] * len(features)
        for chunk, backprop_scores, d_chunk in zip(chunks, backprops, d_scores):
            d_hidden_chunk = backprop_scores(d_chunk).hidden
            for row, index in enumerate(chunk):
                d_units[index] = d_hidden_chunk[row]
        return d_units

    return outputs, backprop


def transformer_gradients(
    model: Model, trf_datas: List[TransformerData], features: List[UnitFeatures], d_units: List[np.ndarray]
) -> List[TransformerData]:
    """TransformerData gradients for the listener: d last_hidden_state, scaled by grad_factor."""
    hidden_shapes = [
        trf.model_output["last_hidden_state"].shape if "last_hidden_state" in trf.model_output else None
        for trf in trf_datas
    ]
    d_hidden = hidden_gradients(d_units, features, hidden_shapes)
    return [
        TransformerData(
            wordpieces=trf_data.wordpieces,
            model_output=ModelOutput(last_hidden_state=model.ops.asarray(d_doc * model.attrs["grad_factor"])),
            align=trf_data.align,
        )
        for trf_data, d_doc in zip(trf_datas, d_hidden)
        if d_doc is not None
    ]
