"""`pairatt_parser`: a graph-based dependency parser over a shared transformer's pair features.

Reads `Doc._.trf_data` (hidden states and attention of every layer and head) through a listener,
scores every (dependent, head) pair of each sentence and decodes one tree per sentence.
Sentences are the Doc's sentence boundaries when it has them, else the whole Doc.
"""

from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
from spacy.attrs import DEP, HEAD
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Model

from ..core.decoding import DECODERS, decode_batch
from ..core.objectives import arc_log_scores, best_labels, biaffine_loss, paper_loss
from ..core.validation import validate_gold_parse, validate_parser_dev_corpus
from ..layers.parser_model import ParseScores
from .base import PairScoringPipe, default_model, prepare_process

LOSS_REDUCTIONS = ("mean", "sum")
DEFAULT_MODEL = default_model(
    "spacy-pairatt.PairAttParser.v1",
    """@architectures = "spacy-pairatt.PairScorer.v1"
mode = "biaffine"
use_embeddings = true
use_attention = true
arc_width = 256
label_width = 128
dropout = 0.1""",
)


@Language.factory(
    "pairatt_parser",
    assigns=["token.dep", "token.head", "token.is_sent_start", "doc.sents"],
    default_config={
        "model": DEFAULT_MODEL,
        "decoder": "mst",
        "loss_reduction": "mean",
        "scorer": {"@scorers": "spacy-pairatt.parser_scorer.v1"},
    },
    default_score_weights={
        "dep_uas": 0.5,
        "dep_las": 0.5,
        "dep_las_per_type": None,
        "dep_uas_punct": None,
        "dep_las_punct": None,
        "dep_single_tree": None,
        "sents_p": None,
        "sents_r": None,
        "sents_f": 0.0,
    },
)
def make_pairatt_parser(
    nlp: Language, name: str, model: Model, decoder: str, loss_reduction: str, scorer: Optional[Callable]
):
    """decoder: "mst" (one well-formed tree, exactly one root, non-projective allowed) or
    "greedy" (each word's best head, as the paper does in training; may not be a tree).
    loss_reduction: "mean" (over the batch's gold words) or "sum", as spaCy's tagger, morphologizer,
    lemmatizer and senter sum theirs. Alone, the two train alike (Adam steps do not depend on the
    gradient's scale); on a transformer shared with those components the encoder follows the sum of
    all their gradients, and a mean makes the parser's about 1/words-per-batch of each of theirs."""
    prepare_process()
    return PairAttParser(nlp.vocab, model, name, decoder=decoder, loss_reduction=loss_reduction, scorer=scorer)


class PairAttParser(PairScoringPipe):
    """Dependency parser scoring word pairs from hidden states and pair-wise attention."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "pairatt_parser",
        *,
        decoder: str = "mst",
        loss_reduction: str = "mean",
        scorer=None,
    ):
        if decoder not in DECODERS:
            raise ValueError(f"pairatt_parser: decoder must be one of {DECODERS}, got {decoder!r}")
        if loss_reduction not in LOSS_REDUCTIONS:
            raise ValueError(f"pairatt_parser: loss_reduction must be one of {LOSS_REDUCTIONS}, got {loss_reduction!r}")
        self.vocab = vocab
        self.model = model
        self.name = name
        self.decoder = decoder
        self.loss_reduction = loss_reduction
        self.scorer = scorer
        self.cfg: Dict = {"labels": [], "root_labels": [], "dims": {}}

    @property
    def label_data(self) -> Dict[str, List[str]]:
        """What `spacy init labels` saves and `initialize(labels=...)` takes back."""
        return {"labels": list(self.cfg["labels"]), "root_labels": list(self.cfg["root_labels"])}

    @property
    def mode(self) -> str:
        return self.model.get_ref("scorer").attrs["mode"]

    def predict(self, docs: Iterable[Doc]):
        """Decode one tree per sentence: (sentences, heads per sentence, label ids per sentence)."""
        docs = list(docs)
        if not any(len(doc) for doc in docs):
            return [], [], []
        sentences, heads, labels = [], [], []
        for parse in self.model.predict(docs):
            sentences.extend(parse.sentences)
            chunk_heads, chunk_labels = self._decode(parse)
            lengths = [n_words + 1 for _, _, n_words in parse.sentences]
            heads.extend(row[:n] for row, n in zip(chunk_heads, lengths))
            labels.extend(row[1:n] for row, n in zip(chunk_labels, lengths))
        return sentences, heads, labels

    def _decode(self, parse: ParseScores) -> Tuple[np.ndarray, np.ndarray]:
        """(B, N) heads and label ids of one chunk; labels are scored on the decoded arcs only."""
        arcs = arc_log_scores(parse.scores, parse.mask, self.mode)
        lengths = np.array([n_words for _, _, n_words in parse.sentences], dtype="int64")
        heads = decode_batch(arcs, lengths, self.decoder)
        label_scores = parse.label_scores(heads)
        root_allowed = np.isin(self.labels, self.cfg["root_labels"])
        return heads, best_labels(label_scores, heads, root_allowed, ~root_allowed)

    def set_annotations(self, docs: Iterable[Doc], predictions) -> None:
        """Write Token.head and Token.dep (the root's head is itself, spaCy's convention)."""
        docs = list(docs)
        sentences, heads_per_sentence, labels_per_sentence = predictions
        label_ids = np.array([self.vocab.strings.add(label) for label in self.labels], dtype="uint64")
        arrays: Dict[int, np.ndarray] = {}
        for (doc_index, start, n_words), heads, label_index in zip(sentences, heads_per_sentence, labels_per_sentence):
            doc = docs[doc_index]
            array = arrays.setdefault(doc_index, np.zeros((len(doc), 2), dtype="uint64"))
            words = np.arange(start, start + n_words)
            absolute_heads = np.where(heads[1:] == 0, words, start + heads[1:] - 1)
            array[words, 0] = (absolute_heads - words).astype("int64").astype("uint64")
            array[words, 1] = label_ids[label_index]
        for doc_index, array in arrays.items():
            docs[doc_index].from_array([HEAD, DEP], array)

    def get_loss(self, examples: Iterable[Example], parses: List[ParseScores]):
        """Loss over all gold words of the batch (their mean or sum: loss_reduction), and its gradient
        for each chunk: d scores, or (d arcs, d labels on the gold arcs) with the biaffine scorer."""
        examples = list(examples)
        if not all(parse.trainable for parse in parses):
            raise ValueError(
                "get_loss needs the training-time scores (model.begin_update(docs)); model.predict's have no gradient"
            )
        for index, example in enumerate(examples):
            validate_gold_parse(example, index, self.labels, source="batch")
        aligned: Dict[int, Tuple] = {}
        golds = [self._gold_arrays(examples, parse, aligned) for parse in parses]
        n_known = max(sum(int((heads >= 0).sum()) for heads, _ in golds), 1) if self.loss_reduction == "mean" else 1
        losses = [
            self._chunk_loss(parse, gold_heads, gold_labels, n_known)
            for parse, (gold_heads, gold_labels) in zip(parses, golds)
        ]
        return sum(loss for loss, _ in losses), [d_chunk for _, d_chunk in losses]

    @staticmethod
    def _chunk_loss(parse: ParseScores, gold_heads: np.ndarray, gold_labels: np.ndarray, n_words: int):
        """(loss, gradient) of one chunk; the biaffine scorer's labels are scored on the gold arcs only."""
        if parse.labels_at is None:
            return paper_loss(parse.scores, parse.mask, gold_heads, gold_labels, n_words)
        label_scores = parse.labels_at(gold_heads)
        loss, d_arcs, d_labels = biaffine_loss(
            parse.scores[..., 0], label_scores, parse.mask, gold_heads, gold_labels, n_words
        )
        return loss, (d_arcs[..., None], d_labels)

    def _gold_arrays(self, examples: List[Example], parse: ParseScores, aligned: Dict[int, Tuple]):
        """(B, N) gold head units and label ids; -1 where the gold data has no usable arc.

        aligned caches each example's gold parse aligned to the predicted tokens.
        """
        label_index = {label: i for i, label in enumerate(self.labels)}
        shape = parse.mask.shape
        gold_heads = np.full(shape, -1, dtype="int64")
        gold_labels = np.full(shape, -1, dtype="int64")
        for b, (doc_index, start, n_words) in enumerate(parse.sentences):
            if doc_index not in aligned:
                aligned[doc_index] = examples[doc_index].get_aligned_parse(projectivize=False)
            heads, deps = aligned[doc_index]
            for unit, token_i in enumerate(range(start, start + n_words), start=1):
                head, dep = heads[token_i], deps[token_i]
                if head is None or dep is None or not dep:
                    continue
                if dep not in label_index:
                    raise ValueError(
                        f"pairatt_parser: label {dep!r} on token {token_i} of example "
                        f"{examples[doc_index].reference.text[:80]!r} is not one of the "
                        f"{len(label_index)} labels the model was initialized with"
                    )
                if head == token_i:
                    gold_heads[b, unit] = 0
                elif start <= head < start + n_words:
                    gold_heads[b, unit] = head - start + 1
                else:
                    continue  # the gold head lies in another predicted sentence
                gold_labels[b, unit] = label_index[dep]
        return gold_heads, gold_labels

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Dict[str, List[str]]] = None,
    ) -> None:
        """Collect labels, check the upstream transformer and build the scorer; check the dev corpus
        of the training config (`validate_parser_dev_corpus`) as training data is checked."""
        validate_get_examples(get_examples, "PairAttParser.initialize")
        if labels is not None:
            self.cfg["labels"] = list(labels["labels"])
            self.cfg["root_labels"] = list(labels["root_labels"])
        else:
            all_labels, root_labels = set(self.cfg["labels"]), set()
            for example in get_examples():
                for token in example.reference:
                    if token.dep_:
                        all_labels.add(token.dep_)
                        if token.head.i == token.i:
                            root_labels.add(token.dep_)
            self.cfg["labels"] = sorted(all_labels)
            self.cfg["root_labels"] = sorted(root_labels)
        if not self.cfg["labels"]:
            raise ValueError(
                "pairatt_parser: no dependency labels found in the training examples; "
                "it needs data with heads and labels (e.g. a .spacy corpus converted from CoNLL-U)"
            )
        for index, example in enumerate(get_examples()):
            validate_gold_parse(example, index, self.labels)
        self._set_dims(nlp, 1 + len(self.cfg["labels"]))
        if nlp is not None:
            validate_parser_dev_corpus(nlp, self.name)
