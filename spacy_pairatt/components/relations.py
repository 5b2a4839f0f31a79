"""`pairatt_rel`: relations between entities from a shared transformer's pair features.

Candidate entities are the spans of `doc.ents` or `doc.spans[spans_key]` (mentions sharing a
`span.id_` form one entity). Every ordered pair of distinct entities is scored from the pooled
entity vectors, the [CLS] context and the attention between the two entities in both
directions; predictions go to `doc._.relations` (see `spacy_pairatt.integration.doc_relations`).
"""

from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Model, set_dropout_rate

from ..core.objectives import entity_pair_mask, relation_loss, relation_probabilities
from ..integration.doc_relations import (
    ENTS,
    candidate_spans,
    distinct_entities,
    set_relation_arrays,
)
from ..integration.extensions import register_extensions
from ..integration.load_settings import ConfigSetting
from ..integration.validation import check_settings, validate_dev_corpus
from ..layers.relation_model import DocEntities, RelationScores
from .base import PairScoringPipe
from .pipe_setup import default_model, prepare_process

DEFAULT_MODEL = default_model(
    "spacy-pairatt.PairAttRelations.v1",
    """@architectures = "spacy-pairatt.RelationScorer.v1"
use_embeddings = true
use_attention = true
hidden_width = 256
dropout = 0.1""",
)

# Every ordered pair of a Doc's candidate entities is scored, so a Doc's memory and time grow with
# the square of its entities; a Doc with more pairs than this (about 1,000 entities) is refused
# with an error naming it, instead of running out of memory. docs/relations.md has the figures.
DEFAULT_MAX_PAIRS_PER_DOC = 1_000_000


@Language.factory(
    "pairatt_rel",
    assigns=["doc._.relations"],
    default_config={
        "model": DEFAULT_MODEL,
        "spans_key": ENTS,
        "multi_label": False,
        "threshold": 0.5,
        "negative_ratio": None,
        "max_pairs_per_doc": DEFAULT_MAX_PAIRS_PER_DOC,
        "seed": 0,
        "scorer": {"@scorers": "spacy-pairatt.relation_scorer.v1"},
    },
    default_score_weights={"rel_micro_f": 1.0, "rel_micro_p": None, "rel_micro_r": None},
)
def make_pairatt_rel(
    nlp: Language,
    name: str,
    model: Model,
    spans_key: str,
    multi_label: bool,
    threshold: float,
    negative_ratio: Optional[float],
    max_pairs_per_doc: int,
    seed: int,
    scorer: Optional[Callable],
):
    """spans_key: "ents" for doc.ents, else a doc.spans key. multi_label: one sigmoid per relation
    type (several relations per pair, DocRED) instead of one softmax over NONE + types (SemEval).
    threshold: the probability a multi-label relation needs to be written. negative_ratio: in
    training, pairs without a relation sampled per pair with one (None: all pairs).
    max_pairs_per_doc: the most ordered entity pairs a Doc may have; a Doc with more is an error.
    spans_key, multi_label and threshold are the config's also when a saved pipeline is loaded
    (`spacy.load(path, config=...)`), so `nlp.config` says what runs."""
    prepare_process()
    return PairAttRelationExtractor(
        nlp.vocab,
        model,
        name,
        spans_key=spans_key,
        multi_label=multi_label,
        threshold=threshold,
        negative_ratio=negative_ratio,
        max_pairs_per_doc=max_pairs_per_doc,
        seed=seed,
        scorer=scorer,
    )


class PairAttRelationExtractor(PairScoringPipe):
    """Directional, labelled relations between the candidate entities of each Doc."""

    CONFIG_SETTINGS = ("spans_key", "multi_label", "threshold")

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "pairatt_rel",
        *,
        spans_key: str = ENTS,
        multi_label: bool = False,
        threshold: float = 0.5,
        negative_ratio: Optional[float] = None,
        max_pairs_per_doc: int = DEFAULT_MAX_PAIRS_PER_DOC,
        seed: int = 0,
        scorer=None,
    ):
        register_extensions()
        check_settings(
            "pairatt_rel", threshold=threshold, negative_ratio=negative_ratio, max_pairs_per_doc=max_pairs_per_doc
        )
        if not isinstance(spans_key, str) or not spans_key:
            raise ValueError(f'pairatt_rel: spans_key must be "ents" or a doc.spans key, got {spans_key!r}')
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.negative_ratio = negative_ratio
        self.max_pairs_per_doc = max_pairs_per_doc
        self.rng = np.random.default_rng(seed)
        self.cfg: Dict = {
            "labels": [],
            "dims": {},
            "spans_key": spans_key,
            "multi_label": multi_label,
            "threshold": float(threshold),
        }

    @property
    def label_data(self) -> List[str]:
        return list(self.cfg["labels"])

    # tuned on held-out data: `set_setting(nlp, name, "threshold", value)`
    threshold = ConfigSetting()

    def doc_entities(self, doc: Doc) -> DocEntities:
        """The Doc's candidate entities, each a list of mention offsets, in order of first mention;
        spans with the same offsets are one entity (`distinct_entities`)."""
        return [
            [(span.start, span.end) for span in mentions]
            for mentions in distinct_entities(candidate_spans(doc, self.cfg["spans_key"]))
        ]

    def candidate_entities(self, docs: List[Doc]) -> List[DocEntities]:
        """`doc_entities` of every Doc; a Doc with more ordered entity pairs than max_pairs_per_doc is
        an error naming it, as every pair is scored (memory and time grow with the pairs)."""
        entities = [self.doc_entities(doc) for doc in docs]
        for index, (doc, doc_entities) in enumerate(zip(docs, entities)):
            n_pairs = len(doc_entities) * (len(doc_entities) - 1)
            if n_pairs > self.max_pairs_per_doc:
                raise ValueError(
                    f"{self.name}: Doc {index} of the batch ({len(doc)} tokens, {doc.text[:60]!r}) has "
                    f"{len(doc_entities):,} candidate entities in {self._candidates_name}, {n_pairs:,} ordered pairs "
                    f"to score, more than max_pairs_per_doc = {self.max_pairs_per_doc:,}. Split the Doc, give it "
                    f"fewer candidates, or raise [components.{self.name}] max_pairs_per_doc (memory grows with "
                    "the pairs: docs/relations.md)"
                )
        return entities

    def predict(self, docs: Iterable[Doc]):
        """(entities per Doc, {doc index: (E, E, K) probabilities of each relation i -> j})."""
        docs = list(docs)
        entities = self.candidate_entities(docs)
        probabilities: Dict[int, np.ndarray] = {}
        if any(len(doc_entities) >= 2 for doc_entities in entities):
            for chunk in self.model.predict((docs, entities)):
                probs = relation_probabilities(chunk.scores, self.cfg["multi_label"])
                for row, doc_index in enumerate(chunk.doc_indices):
                    n = len(entities[doc_index]) + 1
                    probabilities[doc_index] = probs[row, 1:n, 1:n]
        return entities, probabilities

    def set_annotations(self, docs: Iterable[Doc], predictions) -> None:
        """Replace each Doc's relations with the predicted ones (none when it has < 2 entities)."""
        entities, probabilities = predictions
        for doc_index, doc in enumerate(docs):
            probs = probabilities.get(doc_index)
            if probs is None:
                doc._.relations = []
            else:
                set_relation_arrays(doc, *self._relation_arrays(entities[doc_index], probs), labels=self.labels)

    def _relation_arrays(self, entities: DocEntities, probs: np.ndarray) -> Tuple[np.ndarray, ...]:
        """(heads (R, 2), tails (R, 2), label ids (R,), scores (R,)) of the relations to write, heads and
        tails each entity's first mention. multi_label: every type at or above the threshold; else
        each pair's best type unless NONE wins."""
        if self.cfg["multi_label"]:
            chosen = probs >= self.threshold
        else:
            no_relation = 1.0 - probs.sum(axis=-1, keepdims=True)
            best = np.concatenate([no_relation, probs], axis=-1).argmax(axis=-1)
            chosen = best[..., None] - 1 == np.arange(probs.shape[-1])
        heads, tails, types = np.nonzero(chosen & ~np.eye(len(entities), dtype=bool)[..., None])
        first_mentions = np.array([mentions[0] for mentions in entities], dtype="int64")
        return first_mentions[heads], first_mentions[tails], types, probs[heads, tails, types]

    def get_loss(self, examples: Iterable[Example], chunks: List[RelationScores]):
        """Loss averaged over the pairs in the loss (positives and sampled negatives), per-chunk gradients.

        Every example's gold relations are matched to its candidate entities first, so a relation
        with no candidate pair fails even for a Doc that has no pairs to score.
        """
        examples = list(examples)
        golds = [self._gold_relations(example, index) for index, example in enumerate(examples)]
        targets = [self._chunk_targets(golds, chunk) for chunk in chunks]
        n_pairs = sum(int(weights.sum()) for _, weights in targets)
        losses = [
            relation_loss(chunk.scores, weights, gold, self.cfg["multi_label"], n_pairs)
            for chunk, (gold, weights) in zip(chunks, targets)
        ]
        return sum(loss for loss, _ in losses), [d_scores for _, d_scores in losses]

    def _chunk_targets(self, golds: List[List[Tuple[int, int, int]]], chunk: RelationScores):
        """(gold, weights) of one chunk; negatives subsampled to negative_ratio x positives per Doc."""
        batch, n_units = chunk.mask.shape
        gold_types = np.zeros((batch, n_units, n_units, len(self.labels)), dtype="float32")
        for row, doc_index in enumerate(chunk.doc_indices):
            for head, tail, label in golds[doc_index]:
                gold_types[row, head + 1, tail + 1, label] = 1.0
        pairs = entity_pair_mask(chunk.mask)
        positive = gold_types.any(axis=-1)
        weights = pairs.astype("float32")
        if self.negative_ratio is not None:
            negative = pairs & ~positive
            n_keep = np.ceil(self.negative_ratio * np.maximum(positive.sum(axis=(1, 2)), 1)).astype("int64")
            # A random rank per negative pair; keep the n_keep lowest-ranked of each Doc.
            ranks = np.where(negative, self.rng.random(negative.shape), np.inf)
            order = ranks.reshape(batch, -1).argsort(axis=1).argsort(axis=1).reshape(negative.shape)
            weights = (positive | (negative & (order < n_keep[:, None, None]))).astype("float32")
        if self.cfg["multi_label"]:
            return gold_types, weights
        return np.where(positive, gold_types.argmax(axis=-1) + 1, 0), weights

    def _gold_relations(
        self, example: Example, doc_index: int, source: str = "batch", unknown_labels: bool = False
    ) -> List[Tuple[int, int, int]]:
        """(head entity, tail entity, label index) of the reference's relations, on the predicted entities.

        source names the data in messages; unknown_labels: skip relations whose label the model
        does not know (evaluation data) instead of failing.
        """
        predicted_entities = {mentions[0]: i for i, mentions in enumerate(self.doc_entities(example.predicted))}
        label_index = {label: i for i, label in enumerate(self.labels)}
        reference = example.reference
        same_tokens = [t.text for t in reference] == [t.text for t in example.predicted]
        gold = []
        for relation in reference._.relations:
            if relation.label not in label_index:
                if unknown_labels:
                    continue
                raise ValueError(
                    f"pairatt_rel: label {relation.label!r} of example {doc_index} of the {source} "
                    f"({reference.text[:80]!r}) is not one of the {len(label_index)} labels the model was "
                    f"initialized with"
                )
            ends = []
            for span in (relation.head_span(reference), relation.tail_span(reference)):
                aligned = [span] if same_tokens else example.get_aligned_spans_y2x([span])
                key = (aligned[0].start, aligned[0].end) if aligned else None
                if key not in predicted_entities:
                    raise ValueError(
                        f"pairatt_rel: the relation {relation.label!r} of example {doc_index} of the {source} "
                        f"({reference.text[:80]!r}) involves {span.text!r} (tokens {span.start}-{span.end}), "
                        f"which is not the first mention of a candidate entity in the predicted Doc's "
                        f"{self._candidates_name}. Training and dev Docs need their candidate spans: read the "
                        'corpus with "spacy-pairatt.GoldSpansCorpus.v1", which copies them from the reference.'
                    )
                ends.append(predicted_entities[key])
            if ends[0] == ends[1]:
                raise ValueError(
                    f"pairatt_rel: the relation {relation.label!r} of example {doc_index} of the {source} "
                    f"({reference.text[:80]!r}) holds between an entity and itself (spans with the same "
                    f"offsets are one entity); relations need two different entities"
                )
            gold.append((ends[0], ends[1], label_index[relation.label]))
        return gold

    @property
    def _candidates_name(self) -> str:
        key = self.cfg["spans_key"]
        return "doc.ents" if key == ENTS else f"doc.spans[{key!r}]"

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[List[str]] = None,
    ) -> None:
        """Collect relation labels from the reference Docs, check the transformer, build the scorer;
        check the dev corpus of the training config (`validate_dev_corpus`) as training data is checked."""
        validate_get_examples(get_examples, "PairAttRelationExtractor.initialize")
        if labels is not None:
            self.cfg["labels"] = list(labels)
        else:
            found = set(self.cfg["labels"])
            for example in get_examples():
                found.update(relation.label for relation in example.reference._.relations)
            self.cfg["labels"] = sorted(found)
        if not self.cfg["labels"]:
            raise ValueError(
                "pairatt_rel: no relations found in the training examples' doc._.relations; it needs Docs "
                "with relations between spans (e.g. from `python -m spacy_pairatt semeval-convert`)"
            )
        self._set_dims(nlp, 1 + len(self.cfg["labels"]))
        if nlp is not None:
            self._validate_dev_corpus(nlp)

    def _validate_dev_corpus(self, nlp: Language) -> None:
        """The dev corpus must have examples, gold relations, and candidate spans for them on the
        predicted side (what `get_loss` requires of training batches); labels unseen in training are
        allowed there."""
        found = validate_dev_corpus(
            nlp,
            self.name,
            lambda example, index, source: self._gold_relations(example, index, source, unknown_labels=True),
        )
        if found is not None and not any(example.reference._.relations for example in found[1]):
            raise ValueError(
                f"{self.name}: no example of the dev corpus {found[0]} has gold relations in "
                "doc._.relations, so every evaluation would score 0.00. Save the Docs with "
                "DocBin(store_user_data=True) (the converters do) and read them with "
                '"spacy-pairatt.GoldSpansCorpus.v1".'
            )

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None, losses=None) -> Dict[str, float]:
        """The model takes (docs, entities), not docs, so TrainablePipe.update is adapted here."""
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        docs = [eg.predicted for eg in examples]
        set_dropout_rate(self.model, drop)
        chunks, backprop = self.model.begin_update((docs, self.candidate_entities(docs)))
        loss, d_scores = self.get_loss(examples, chunks)
        backprop(d_scores)
        if sgd not in (None, False):
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses
