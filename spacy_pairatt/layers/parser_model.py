"""The parser's thinc model: transformer listener -> word-level pair features -> pair scorer."""

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy as np
from spacy.tokens import Doc
from spacy.util import registry
from spacy_transformers.data_classes import TransformerData
from thinc.api import Model

from .deprecations import warn_renamed
from .pair_batch import PairBatch, parser_groups, window_batch
from .pair_scorer import ArcScores, PairScores, PairScoresGradient
from .unit_scoring import score_chunks, transformer_gradients


@dataclass
class ParseScores:
    """Pair scores for one chunk of sentences of similar length (the model returns a list).

    sentences: (doc index, first token, number of words) per row of `scores`;
    scores: (B, N, N, 1 + K) from the paper's pair scorer, or (B, N, N, 1) arc scores from the
    biaffine one, whose label scores come from labels_at(heads) for (B, N) heads (gold in training,
    decoded at inference); mask: (B, N) real units, root included; trainable: made by
    begin_update, so the loss may be taken (model.predict's scores have no gradient).
    """

    sentences: List[Tuple[int, int, int]]
    scores: np.ndarray
    mask: np.ndarray
    labels_at: Optional[Callable[[np.ndarray], np.ndarray]] = None
    trainable: bool = False

    def label_scores(self, heads: np.ndarray) -> np.ndarray:
        """(B, N, K) label scores of the arcs heads[b, i] -> i; units without a head (-1) are not scored."""
        if self.labels_at is not None:
            return self.labels_at(heads)
        batch, n_units = heads.shape
        return self.scores[np.arange(batch)[:, None], np.arange(n_units)[None], np.maximum(heads, 0), 1:]


@registry.architectures("spacy-pairatt.PairAttParserModel.v1")
def build_pairatt_parser_model(
    tok2vec: Model[List[Doc], List[TransformerData]],
    pair_scorer: Model[PairBatch, PairScores],
    grad_factor: float = 1.0,
    max_pairs_per_chunk: int = 200_000,
) -> Model[List[Doc], List[ParseScores]]:
    """The `pairatt_parser` pipe's model: the listener's TransformerData -> ParseScores per chunk.

    pair_scorer: `spacy-pairatt.BiaffinePairScorer.v1` or `spacy-pairatt.PaperPairScorer.v1`.
    grad_factor scales the gradient sent back into the shared transformer (0 freezes it for this
    component); max_pairs_per_chunk bounds the word pairs scored at once (memory). The gradient
    reaches the transformer through the hidden states, and through the attention weights too when
    the upstream transformer takes it (`spacy-pairatt.AttentionTransformerModel.v1` under
    `pairatt_transformer`).
    """
    return _parser_model("spacy-pairatt.PairAttParserModel.v1", tok2vec, pair_scorer, grad_factor, max_pairs_per_chunk)


@registry.architectures("spacy-pairatt.PairAttParser.v1")
def build_pairatt_parser(
    tok2vec: Model[List[Doc], List[TransformerData]],
    scorer: Model[PairBatch, PairScores],
    grad_factor: float = 1.0,
    max_pairs_per_chunk: int = 200_000,
) -> Model[List[Doc], List[ParseScores]]:
    """Deprecated name of `spacy-pairatt.PairAttParserModel.v1`, whose `pair_scorer` was `scorer` here."""
    warn_renamed("spacy-pairatt.PairAttParser.v1", "spacy-pairatt.PairAttParserModel.v1 with [model.pair_scorer]")
    return _parser_model("spacy-pairatt.PairAttParser.v1", tok2vec, scorer, grad_factor, max_pairs_per_chunk)


def _parser_model(
    architecture: str,
    tok2vec: Model[List[Doc], List[TransformerData]],
    pair_scorer: Model[PairBatch, PairScores],
    grad_factor: float,
    max_pairs_per_chunk: int,
) -> Model[List[Doc], List[ParseScores]]:
    from ..integration.validation import check_settings

    check_settings(architecture, grad_factor=grad_factor, max_pairs_per_chunk=max_pairs_per_chunk)
    return Model(
        "pairatt_parser_model",
        forward,
        layers=[tok2vec, pair_scorer],
        # "scorer": the deprecated name of the "pair_scorer" ref, for code written against it.
        refs={"tok2vec": tok2vec, "pair_scorer": pair_scorer, "scorer": pair_scorer},
        attrs={"grad_factor": grad_factor, "max_pairs_per_chunk": max_pairs_per_chunk},
    )


def forward(model: Model, docs: List[Doc], is_train: bool):
    tok2vec, scorer = model.get_ref("tok2vec"), model.get_ref("pair_scorer")
    trf_datas, backprop_trf = tok2vec(docs, is_train)
    groups, sentences = parser_groups(docs)
    if not sentences:
        return [], lambda d_scores: backprop_trf([])
    windows = window_batch(docs, trf_datas, scorer.attrs["use_attention"], [len(doc) > 0 for doc in docs])
    attention_requires_grad = (
        is_train and model.attrs["grad_factor"] != 0 and getattr(tok2vec, "upstream_takes_attention_gradients", False)
    )
    scored, backprop_windows = score_chunks(
        scorer, windows, groups, model.attrs["max_pairs_per_chunk"], is_train, attention_requires_grad
    )
    outputs = [parse_scores([sentences[i] for i in chunk], scores, mask, is_train) for chunk, scores, mask in scored]

    def backprop(d_scores: List[PairScoresGradient]) -> List[TransformerData]:
        return backprop_trf(transformer_gradients(model, trf_datas, windows, backprop_windows(d_scores)))

    return outputs, backprop


def parse_scores(
    sentences: List[Tuple[int, int, int]], scores: PairScores, mask: np.ndarray, trainable: bool
) -> ParseScores:
    if isinstance(scores, ArcScores):
        return ParseScores(sentences, scores.arcs, mask, scores.labels_at, trainable)
    return ParseScores(sentences, scores, mask, trainable=trainable)
