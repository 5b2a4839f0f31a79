"""The relation model: transformer listener -> entity-level pair features -> relation scorer."""

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
from spacy.tokens import Doc
from spacy.util import registry
from spacy_transformers.data_classes import TransformerData
from thinc.api import Model
from thinc.types import Floats4d

from ..integration.validation import check_settings
from .deprecations import renamed_argument
from .pair_batch import PairBatch, entity_groups, window_batch
from .unit_scoring import score_chunks, transformer_gradients

# One Doc's candidate entities, each a list of mention offsets (start, end).
DocEntities = List[List[Tuple[int, int]]]


@dataclass
class RelationScores:
    """Pair scores for one chunk of Docs with similar numbers of entities.

    doc_indices: the Doc of each row of `scores`; scores: (B, N, N, 1 + K) where unit u >= 1 is
    entity u - 1 of that Doc and [b, i, j] scores the relation i -> j; mask: (B, N) real units,
    the root (unit 0) included.
    """

    doc_indices: List[int]
    scores: np.ndarray
    mask: np.ndarray


@registry.architectures("spacy-pairatt.PairAttRelations.v1")
def build_pairatt_relations(
    tok2vec: Model[List[Doc], List[TransformerData]],
    pair_scorer: Optional[Model[PairBatch, Floats4d]] = None,
    grad_factor: float = 1.0,
    max_pairs_per_chunk: int = 200_000,
    scorer: Optional[Model[PairBatch, Floats4d]] = None,
) -> Model[Tuple[List[Doc], List[DocEntities]], List[RelationScores]]:
    """The `pairatt_rel` pipe's model; takes (docs, candidate entities per Doc).

    pair_scorer: `spacy-pairatt.RelationScorer.v1` (`scorer` is its deprecated name). grad_factor
    scales the gradient sent into the shared transformer (0 freezes it for this component);
    max_pairs_per_chunk bounds the entity pairs scored at once (memory).
    """
    check_settings(
        "spacy-pairatt.PairAttRelations.v1", grad_factor=grad_factor, max_pairs_per_chunk=max_pairs_per_chunk
    )
    pair_scorer = renamed_argument(
        pair_scorer, scorer, "[model.scorer] of spacy-pairatt.PairAttRelations.v1", "[model.pair_scorer]"
    )
    return Model(
        "pairatt_relations_model",
        forward,
        layers=[tok2vec, pair_scorer],
        # "scorer": the deprecated name of the "pair_scorer" ref, for code written against it.
        refs={"tok2vec": tok2vec, "pair_scorer": pair_scorer, "scorer": pair_scorer},
        attrs={"grad_factor": grad_factor, "max_pairs_per_chunk": max_pairs_per_chunk},
    )


def forward(model: Model, inputs: Tuple[List[Doc], List[DocEntities]], is_train: bool):
    docs, entities = inputs
    tok2vec, scorer = model.get_ref("tok2vec"), model.get_ref("pair_scorer")
    trf_datas, backprop_trf = tok2vec(docs, is_train)
    groups = entity_groups(entities)
    if not len(groups.doc):
        return [], lambda d_scores: backprop_trf([])
    needed = np.zeros(len(docs), dtype=bool)
    needed[groups.doc] = True
    windows = window_batch(docs, trf_datas, scorer.attrs["use_attention"], needed)
    scored, backprop_windows = score_chunks(scorer, windows, groups, model.attrs["max_pairs_per_chunk"], is_train)
    outputs = [RelationScores(groups.doc[chunk].tolist(), scores, mask) for chunk, scores, mask in scored]

    def backprop(d_scores: List[np.ndarray]):
        return backprop_trf(transformer_gradients(model, trf_datas, windows, backprop_windows(d_scores)))

    return outputs, backprop
