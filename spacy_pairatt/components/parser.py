"""`pairatt_parser`: a graph-based dependency parser over a shared transformer's pair features.

Reads `Doc._.trf_data` (hidden states and attention of every layer and head) through a listener,
scores every (dependent, head) pair of each sentence and decodes one tree per sentence.
Sentences are the Doc's sentence boundaries when it has them, else the whole Doc.
"""

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np
from spacy.attrs import DEP, HEAD, IS_SPACE
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Model

from ..core.decoding import DECODERS, decode_batch
from ..core.layout import attach_leaves
from ..core.marginals import decoded_tree_confidence, root_first_to_diagonal
from ..core.objectives import ARC_OBJECTIVES, allowed_labels, arc_log_scores, biaffine_loss, paper_loss
from ..integration.doc_confidence import (
    CONFIDENCE_LEVELS,
    BatchConfidence,
    ChunkWords,
    SentenceConfidence,
)
from ..integration.extensions import register_extensions
from ..integration.validation import validate_gold_parse, validate_parser_dev_corpus
from ..layers.pair_scorer import PairScoresGradient
from ..layers.parser_model import ParseScores
from .base import PairScoringPipe
from .pipe_setup import default_model, prepare_process

LOSS_REDUCTIONS = ("mean", "sum")
DEFAULT_MODEL = default_model(
    "spacy-pairatt.PairAttParserModel.v1",
    """@architectures = "spacy-pairatt.BiaffinePairScorer.v1"
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
        "arc_objective": "local",
        "confidence": "arcs",
        "head_candidates": 3,
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
    nlp: Language,
    name: str,
    model: Model,
    decoder: str,
    loss_reduction: str,
    arc_objective: str,
    confidence: str,
    head_candidates: int,
    scorer: Optional[Callable],
):
    """decoder: "mst" (one well-formed tree, exactly one root, non-projective allowed) or
    "greedy" (each word's best head, as the paper does in training; may not be a tree).
    loss_reduction: "mean" (over the batch's gold words) or "sum", as spaCy's tagger, morphologizer,
    lemmatizer and senter sum theirs. Alone, the two train alike (Adam steps do not depend on the
    gradient's scale); on a transformer shared with those components the encoder follows the sum of
    all their gradients, and a mean makes the parser's about 1/words-per-batch of each of theirs.
    arc_objective: "local" (each word's head on its own: the paper's pair softmax or the biaffine
    head softmax) or "tree_crf" (the gold tree's negative log-likelihood among all single-root trees;
    biaffine scorer only). confidence: what the parser stores on the Doc (`spacy_pairatt.integration.doc_confidence`):
    "none", "arcs" (head_prob, dep_prob, head_candidates, parse_confidence) or "matrix" (also each
    sentence's arc marginals); head_candidates: how many heads `Token._.head_candidates` lists."""
    prepare_process()
    return PairAttParser(
        nlp.vocab,
        model,
        name,
        decoder=decoder,
        loss_reduction=loss_reduction,
        arc_objective=arc_objective,
        confidence=confidence,
        head_candidates=head_candidates,
        scorer=scorer,
    )


def sentence_layout(sentences: List[Tuple[int, int, int]], n_units: int, doc_offsets: np.ndarray):
    """Where a chunk's sentence rows lie in the batch's Docs laid end to end (doc_offsets: each Doc's
    first token there): (B,) doc_index, first (its first word's position) and n_words, and (B, N)
    `inside`, the units that are words (1..n_words; unit u is the token at first + u - 1)."""
    doc_index, start, n_words = (np.array(column, dtype="int64") for column in zip(*sentences))
    units = np.arange(n_units)[None, :]
    return doc_index, doc_offsets[doc_index] + start, n_words, (units >= 1) & (units <= n_words[:, None])


@dataclass
class DecodedChunk:
    """One chunk of sentences as the decoder saw and left it: what `predict` hands `set_annotations`,
    and what confidence and calibration read.

    sentences: (doc index, first token, words) per row; arcs (B, N, N) arc log-scores in the
    decoder's layout (unit 0 the root), whitespace tokens already out of the tree (`attach_leaves`);
    lengths (B,) words; heads (B, N) decoded head units; label_scores (B, N, K) on the decoded
    arcs; allowed (B, N, K) the labels the decoder could choose there; labels (B, N) its choices;
    whitespace (B, N) the units that are whitespace tokens; confidence: `decoded_tree_confidence`'s
    arrays where the parser stores confidence, else None.
    """

    sentences: List[Tuple[int, int, int]]
    arcs: np.ndarray
    lengths: np.ndarray
    heads: np.ndarray
    label_scores: np.ndarray
    allowed: np.ndarray
    labels: np.ndarray
    whitespace: np.ndarray
    confidence: Optional[Dict[str, np.ndarray]] = None

    def confidence_at(
        self, arc_temperature: float, label_temperature: float, n_candidates: int
    ) -> Dict[str, np.ndarray]:
        """`decoded_tree_confidence` of these sentences at these temperatures."""
        return decoded_tree_confidence(
            self.arcs,
            self.lengths,
            self.heads,
            self.label_scores,
            self.allowed,
            self.labels,
            arc_temperature=arc_temperature,
            label_temperature=label_temperature,
            n_candidates=n_candidates,
            leaves=self.whitespace,
        )

    def sentence_confidence(self, row: int, keep_matrix: bool) -> SentenceConfidence:
        """Sentence `row`'s stored confidence (words only)."""
        arrays, n = self.confidence, int(self.lengths[row]) + 1
        matrix = (
            root_first_to_diagonal(arrays["marginals"][row : row + 1])[0].astype("float32") if keep_matrix else None
        )
        return SentenceConfidence(
            head_prob=arrays["head_prob"][row, 1:n],
            dep_prob=arrays["dep_prob"][row, 1:n],
            candidate_units=arrays["candidate_units"][row, 1:n],
            candidate_probs=arrays["candidate_probs"][row, 1:n],
            tree_prob=float(arrays["tree_prob"][row]),
            matrix=None if matrix is None else matrix[: n - 1, : n - 1],
        )

    def words(self, doc_offsets: np.ndarray) -> ChunkWords:
        """Where the chunk's words and their decoded heads are in the batch's Docs laid end to end
        (doc_offsets: each Doc's first token there)."""
        doc_index, first, n_words, inside = sentence_layout(self.sentences, self.heads.shape[1], doc_offsets)
        row, unit = np.nonzero(inside)
        token = first[row] + unit - 1
        head_unit = self.heads[row, unit]
        head = np.where(head_unit == 0, token, first[row] + head_unit - 1)
        return ChunkWords(doc_index, first, n_words, row, unit, token, head)


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
        arc_objective: str = "local",
        confidence: str = "arcs",
        head_candidates: int = 3,
        scorer=None,
    ):
        choices = {
            "decoder": (decoder, DECODERS),
            "loss_reduction": (loss_reduction, LOSS_REDUCTIONS),
            "arc_objective": (arc_objective, ARC_OBJECTIVES),
            "confidence": (confidence, CONFIDENCE_LEVELS),
        }
        for key, (value, allowed) in choices.items():
            if value not in allowed:
                raise ValueError(f"pairatt_parser: {key} must be one of {allowed}, got {value!r}")
        if isinstance(head_candidates, bool) or not isinstance(head_candidates, int) or head_candidates < 1:
            raise ValueError(f"pairatt_parser: head_candidates must be a whole number >= 1, got {head_candidates!r}")
        if arc_objective == "tree_crf" and model.get_ref("pair_scorer").attrs["mode"] != "biaffine":
            raise ValueError(
                'pairatt_parser: arc_objective = "tree_crf" needs the biaffine scorer '
                '([components.pairatt_parser.model.pair_scorer] @architectures = "spacy-pairatt.BiaffinePairScorer.v1")'
            )
        self.vocab = vocab
        self.model = model
        self.name = name
        self.decoder = decoder
        self.loss_reduction = loss_reduction
        self.arc_objective = arc_objective
        self.confidence = confidence
        self.head_candidates = head_candidates
        self.scorer = scorer
        # arc_temperature / label_temperature: fitted on dev by `python -m spacy_pairatt calibrate`.
        self.cfg: Dict = {"labels": [], "root_labels": [], "dims": {}, "arc_temperature": 1.0, "label_temperature": 1.0}
        register_extensions()

    @property
    def label_data(self) -> Dict[str, List[str]]:
        """What `spacy init labels` saves and `initialize(labels=...)` takes back."""
        return {"labels": list(self.cfg["labels"]), "root_labels": list(self.cfg["root_labels"])}

    @property
    def mode(self) -> str:
        return self.model.get_ref("pair_scorer").attrs["mode"]

    def predict(self, docs: Iterable[Doc]) -> List[DecodedChunk]:
        """Decode one tree per sentence, chunk by chunk, with the chunk's confidence unless confidence = "none"."""
        docs = list(docs)
        if not any(len(doc) for doc in docs):
            return []
        chunks = list(self.decode_chunks(docs))
        if self.confidence != "none":
            for chunk in chunks:
                chunk.confidence = self.calibrated_confidence(chunk)
        return chunks

    def decode_chunks(self, docs: List[Doc]) -> Iterator[DecodedChunk]:
        """Score and decode the Docs' sentences chunk by chunk; labels are scored on the decoded arcs
        only. Whitespace tokens are no words of the tree: each hangs from the word before it (or after it)."""
        root_allowed = np.isin(self.labels, self.cfg["root_labels"])
        is_space = np.concatenate([np.zeros(1, dtype=bool)] + [doc.to_array(IS_SPACE).astype(bool) for doc in docs])
        doc_offsets = np.cumsum([0] + [len(doc) for doc in docs])
        for parse in self.model.predict(docs):
            lengths = np.array([n_words for _, _, n_words in parse.sentences], dtype="int64")
            whitespace = self._whitespace_units(parse.sentences, parse.mask.shape, is_space, doc_offsets)
            arcs = attach_leaves(arc_log_scores(parse.scores, parse.mask, self.mode), lengths, whitespace)
            heads = decode_batch(arcs, lengths, self.decoder)
            label_scores = parse.label_scores(heads)
            allowed = allowed_labels(heads, root_allowed, ~root_allowed)
            labels = np.where(allowed, label_scores, -np.inf).argmax(axis=-1)
            yield DecodedChunk(parse.sentences, arcs, lengths, heads, label_scores, allowed, labels, whitespace)

    @staticmethod
    def _whitespace_units(sentences, shape: Tuple[int, int], is_space: np.ndarray, doc_offsets: np.ndarray):
        """(B, N) True for the units that are whitespace tokens; is_space: every Doc's tokens after
        one leading False (what the units outside the sentences read)."""
        _, first, _, inside = sentence_layout(sentences, shape[1], doc_offsets)
        units = np.arange(shape[1])[None, :]
        return is_space[np.where(inside, 1 + first[:, None] + units - 1, 0)]

    def calibrated_confidence(self, chunk: DecodedChunk) -> Dict[str, np.ndarray]:
        """A chunk's confidence at the temperatures `calibrate` fitted (1 until then)."""
        return chunk.confidence_at(
            self.cfg.get("arc_temperature", 1.0), self.cfg.get("label_temperature", 1.0), self.head_candidates
        )

    def set_annotations(self, docs: Iterable[Doc], chunks: List[DecodedChunk]) -> None:
        """Write Token.head and Token.dep (the root's head is itself, spaCy's convention) and the confidence store."""
        docs = list(docs)
        label_ids = np.array([self.vocab.strings.add(label) for label in self.labels], dtype="uint64")
        offsets = np.cumsum([0] + [len(doc) for doc in docs])
        annotation = np.zeros((offsets[-1], 2), dtype="uint64")
        parsed = np.zeros(len(docs), dtype=bool)
        confidence = None
        keep_matrix = self.confidence == "matrix"
        for chunk in chunks:
            words = chunk.words(offsets)
            annotation[words.token, 0] = (words.head - words.token).astype("uint64")
            annotation[words.token, 1] = label_ids[chunk.labels[words.row, words.unit]]
            parsed[words.doc_index] = True
            if chunk.confidence is not None:
                confidence = confidence or BatchConfidence(offsets, self.head_candidates)
                matrices = (
                    [chunk.sentence_confidence(row, True).matrix for row in range(len(chunk.sentences))]
                    if keep_matrix
                    else None
                )
                confidence.fill(words, chunk.confidence, matrices)
        for doc_index in np.flatnonzero(parsed):
            doc = docs[doc_index]
            doc.from_array([HEAD, DEP], annotation[offsets[doc_index] : offsets[doc_index + 1]])
            doc._.pairatt_confidence = None if confidence is None else confidence.store(doc_index, doc)

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
        golds = [self.gold_arrays(examples, parse.sentences, parse.mask.shape, aligned) for parse in parses]
        n_known = max(sum(int((heads >= 0).sum()) for heads, _ in golds), 1) if self.loss_reduction == "mean" else 1
        losses = [
            self._chunk_loss(parse, gold_heads, gold_labels, n_known)
            for parse, (gold_heads, gold_labels) in zip(parses, golds)
        ]
        return sum(loss for loss, _ in losses), [d_chunk for _, d_chunk in losses]

    def _chunk_loss(
        self, parse: ParseScores, gold_heads: np.ndarray, gold_labels: np.ndarray, n_words: int
    ) -> Tuple[float, PairScoresGradient]:
        """(loss, gradient) of one chunk; the biaffine scorer's labels are scored on the gold arcs only."""
        if parse.labels_at is None:
            return paper_loss(parse.scores, parse.mask, gold_heads, gold_labels, n_words)
        label_scores = parse.labels_at(gold_heads)
        loss, d_arcs, d_labels = biaffine_loss(
            parse.scores[..., 0], label_scores, parse.mask, gold_heads, gold_labels, n_words, self.arc_objective
        )
        return loss, (d_arcs[..., None], d_labels)

    def gold_arrays(
        self,
        examples: List[Example],
        sentences: List[Tuple[int, int, int]],
        shape: Tuple[int, int],
        aligned: Dict,
        unknown_label: Optional[int] = None,
    ) -> Tuple[np.ndarray, np.ndarray]:
        """(B, N) gold head units and label ids of a chunk's sentences (doc index, first token, words)
        in examples; -1 where the gold data has no usable arc. aligned caches each example's gold
        parse aligned to the predicted tokens. A gold label the model does not know is an error, or
        `unknown_label` where one is given (evaluation: the parser cannot get it right).
        """
        label_index = {label: i for i, label in enumerate(self.labels)}
        gold_heads = np.full(shape, -1, dtype="int64")
        gold_labels = np.full(shape, -1, dtype="int64")
        for b, (doc_index, start, n_words) in enumerate(sentences):
            if doc_index not in aligned:
                aligned[doc_index] = examples[doc_index].get_aligned_parse(projectivize=False)
            heads, deps = aligned[doc_index]
            for unit, token_i in enumerate(range(start, start + n_words), start=1):
                head, dep = heads[token_i], deps[token_i]
                if head is None or dep is None or not dep:
                    continue
                if dep not in label_index and unknown_label is None:
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
                gold_labels[b, unit] = label_index.get(dep, unknown_label)
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
