"""The parser's thinc model: transformer listener -> word-level pair features -> pair scorer."""

from dataclasses import dataclass
from typing import List, Tuple

import numpy as np
from spacy.tokens import Doc
from spacy_transformers.data_classes import TransformerData
from spacy_transformers.layers import TransformerListener
from thinc.api import Model
from transformers.file_utils import ModelOutput

from ..features import hidden_gradients, pad_batch, sentence_features


@dataclass
class ParseScores:
    """Pair scores for one chunk of sentences of similar length (the model returns a list).

    sentences: (doc index, first token, number of words) per row of `scores`;
    scores: (B, N, N, 1 + K) from the pair scorer; mask: (B, N) real units, root included.
    """

    sentences: List[Tuple[int, int, int]]
    scores: np.ndarray
    mask: np.ndarray


def length_chunks(lengths: List[int], max_pairs: int) -> List[List[int]]:
    """Indices grouped by length so that chunk size x longest length squared stays under max_pairs.

    Padding every sentence to the longest one of a whole batch makes memory grow with
    batch size x longest sentence squared; chunks keep it bounded.
    """
    order = np.argsort(lengths, kind="stable")
    chunks: List[List[int]] = [[]]
    for index in order:
        if chunks[-1] and (len(chunks[-1]) + 1) * lengths[index] ** 2 > max_pairs:
            chunks.append([])
        chunks[-1].append(int(index))
    return [chunk for chunk in chunks if chunk]


def build_transformer_listener(upstream: str = "*") -> Model[List[Doc], List[TransformerData]]:
    """Registered as `spacy-pairatt.TransformerListener.v1`: the raw per-Doc TransformerData.

    Unlike `spacy-transformers.TransformerListener.v1`, it does not pool to token vectors, so
    the attention maps and the wordpiece alignment reach the parser.
    """
    return TransformerListener(upstream_name=upstream)


def build_pairatt_parser(
    tok2vec: Model[List[Doc], List[TransformerData]],
    scorer: Model,
    grad_factor: float = 1.0,
    max_pairs_per_chunk: int = 200_000,
) -> Model[List[Doc], List[ParseScores]]:
    """Registered as `spacy-pairatt.PairAttParser.v1`.

    grad_factor scales the gradient sent back into the shared transformer (0 freezes it for
    this component); max_pairs_per_chunk bounds the word pairs scored at once (memory).
    """
    return Model(
        "pairatt_parser_model",
        forward,
        layers=[tok2vec, scorer],
        refs={"tok2vec": tok2vec, "scorer": scorer},
        attrs={"grad_factor": grad_factor, "max_pairs_per_chunk": max_pairs_per_chunk},
    )


def forward(model: Model, docs: List[Doc], is_train: bool):
    tok2vec, scorer = model.get_ref("tok2vec"), model.get_ref("scorer")
    trf_datas, backprop_trf = tok2vec(docs, is_train)
    features = sentence_features(docs, trf_datas, scorer.attrs["use_attention"])
    sentences = [(f.doc_index, f.start, f.n_words) for f in features]
    hidden_shapes = [
        trf.model_output["last_hidden_state"].shape if "last_hidden_state" in trf.model_output else None
        for trf in trf_datas
    ]
    chunks = length_chunks([f.hidden.shape[0] for f in features], model.attrs["max_pairs_per_chunk"])
    outputs, backprops = [], []
    for chunk in chunks:
        batch = pad_batch([features[i] for i in chunk], scorer.get_dim("nI"), scorer.get_dim("nA"))
        scores, backprop_scores = scorer(batch, is_train)
        outputs.append(ParseScores([sentences[i] for i in chunk], scores, batch.mask))
        backprops.append(backprop_scores)

    def backprop(d_scores: List[np.ndarray]) -> List[Doc]:
        d_units = [None] * len(features)
        for chunk, backprop_scores, d_chunk in zip(chunks, backprops, d_scores):
            d_hidden_chunk = backprop_scores(d_chunk).hidden
            for row, index in enumerate(chunk):
                d_units[index] = d_hidden_chunk[row]
        d_hidden = hidden_gradients(d_units, features, hidden_shapes)
        d_trf_datas = [
            TransformerData(
                wordpieces=trf_data.wordpieces,
                model_output=ModelOutput(last_hidden_state=model.ops.asarray(d_doc * model.attrs["grad_factor"])),
                align=trf_data.align,
            )
            for trf_data, d_doc in zip(trf_datas, d_hidden)
            if d_doc is not None
        ]
        return backprop_trf(d_trf_datas)

    return outputs, backprop
