"""What the parser and relation models share: score chunks of groups, send gradients back.

A *group* is what one pair-score matrix covers: a sentence's words for the parser, a Doc's
entities for relations. Groups are scored in chunks of similar size; the scorer pools each chunk
from the batch's windows itself (torch, on the transformer's device), so its backprop
gives the gradient of the windows' `last_hidden_state` and, when asked for, of their attentions,
which go back to the shared transformer one Doc at a time.
"""

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar

import numpy as np
import torch
from spacy_transformers.data_classes import TransformerData
from thinc.api import Model
from transformers.file_utils import ModelOutput

from ..core.alignment import Groups
from .pair_batch import PairBatch, WindowBatch, chunk_batch, split_window_gradients

# A scorer's output for one chunk (an array, or the biaffine scorer's ArcScores) and its gradient.
ScoresT = TypeVar("ScoresT")
ScoresGradient = Any


def length_chunks(lengths: Sequence[int], max_pairs: int, max_padding: float = 4.0) -> List[List[int]]:
    """Indices grouped by length so that chunk size x longest length squared stays under max_pairs.

    Every group of a chunk is padded to its longest, so a chunk costs size x longest squared
    pairs: bounding that by max_pairs bounds memory (a group longer than that is a chunk of its
    own), and a chunk also ends where the padding would make it cost more than `max_padding`
    times its groups' own pairs. Each chunk also costs a fixed number of small tensor operations,
    which on EWT outweigh the padded pairs: in batches of 64 test sentences, one chunk per batch
    scores 6.6 times the real pairs, a factor of 4 gives 68 chunks at 3.0 times, a factor of 2
    139 chunks at 1.7 times, and the trained parser's inference took about a sixth longer at 2
    than at 4 (training steps the same).
    """
    order = np.argsort(np.asarray(lengths), kind="stable")
    chunks: List[List[int]] = [[]]
    real_pairs = 0
    for index in order:
        pairs = int(lengths[index]) ** 2
        padded = (len(chunks[-1]) + 1) * pairs
        if chunks[-1] and (padded > max_pairs or padded > max_padding * (real_pairs + pairs)):
            chunks.append([])
            real_pairs = 0
        chunks[-1].append(int(index))
        real_pairs += pairs
    return [chunk for chunk in chunks if chunk]


@dataclass
class WindowGradients:
    """The gradient of a WindowBatch's tensors, bucket by bucket: hidden [(W_b, P_b, M)]; attention
    [[(W_b, H, P_b, P_b)] per layer], or None."""

    hidden: List[torch.Tensor]
    attention: Optional[List[List[torch.Tensor]]] = None


def score_chunks(
    scorer: Model[PairBatch, ScoresT],
    windows: WindowBatch,
    groups: Groups,
    max_pairs: int,
    is_train: bool,
    attention_requires_grad: bool = False,
) -> Tuple[List[Tuple[List[int], ScoresT, np.ndarray]], Callable[[List[ScoresGradient]], WindowGradients]]:
    """[(group indices, the scorer's output, mask (B, N))] per chunk, and the backprop.

    The backprop takes one gradient per chunk, what the scorer's own backprop takes (`PairScoresGradient`
    in pair_scorer.py), and returns the summed WindowGradients.
    """
    chunks = length_chunks(groups.n_units, max_pairs)
    outputs, backprops = [], []
    for chunk in chunks:
        batch = chunk_batch(windows, groups, chunk, attention_requires_grad)
        scores, backprop_scores = scorer(batch, is_train)
        outputs.append((chunk, scores, batch.mask))
        backprops.append(backprop_scores)

    def backprop(d_scores: List[ScoresGradient]) -> WindowGradients:
        total = WindowGradients([torch.zeros_like(bucket) for bucket in windows.hidden])
        for backprop_scores, d_chunk in zip(backprops, d_scores):
            d_batch = backprop_scores(d_chunk)
            for sum_d, d in zip(total.hidden, d_batch.hidden):
                sum_d += d
            if d_batch.attention is not None and total.attention is None:
                total.attention = d_batch.attention
            elif d_batch.attention is not None:
                total.attention = [
                    [sum_d + d for sum_d, d in zip(sum_bucket, bucket)]
                    for sum_bucket, bucket in zip(total.attention, d_batch.attention)
                ]
        return total

    return outputs, backprop


def transformer_gradients(
    model: Model, trf_datas: List[TransformerData], windows: WindowBatch, d_windows: WindowGradients
) -> List[TransformerData]:
    """TransformerData gradients for the listener, scaled by grad_factor: d last_hidden_state, and
    d attentions (one array per layer) when the scorer returned them.

    One per Doc with transformer output, in Doc order (the transformer component matches them to
    its Docs by position); zeros for Docs with output that the scorer did not read.
    """
    grad_factor = model.attrs["grad_factor"]
    d_hidden = [d * grad_factor for d in d_windows.hidden]
    d_attention = None
    if d_windows.attention is not None:
        d_attention = [[d * grad_factor for d in bucket] for bucket in d_windows.attention]
    gradients = []
    for trf_data, doc_grads in zip(trf_datas, split_window_gradients(windows, d_hidden, d_attention)):
        output = trf_data.model_output
        if "last_hidden_state" not in output:
            continue
        if doc_grads is None:
            doc_grads = (model.ops.xp.zeros_like(output["last_hidden_state"]), None)
        d_output = ModelOutput(last_hidden_state=doc_grads[0])
        if doc_grads[1] is not None:
            d_output["attentions"] = doc_grads[1]
        gradients.append(TransformerData(wordpieces=trf_data.wordpieces, model_output=d_output, align=trf_data.align))
    return gradients
