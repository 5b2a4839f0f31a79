"""`pairatt_lemmatizer`: spaCy's edit-tree lemmatizer with the letter case taken out of the trees.

spaCy's `trainable_lemmatizer` learns one edit tree per spelling change from form to lemma, case
included: "The" -> "the" and "What" -> "what" are two trees (each replaces its capital letter), so
lowercasing a capitalised word is learnt one first letter at a time, and "Charging" has no tree
unless a capitalised "-ing" word with that first letter was frequent in training. Here, as in UDPipe
2's lemma rules, a label is an edit tree between the lowercased form and the lowercased lemma plus
a casing of the result: all lowercase, cased like the form letter by letter, capitalised, or upper
case. On UD English-EWT train that leaves fewer labels, each learnt from more words, and fewer dev
words whose lemma no label gives (tests/components/test_lemmatizer.py counts the labels). A lemma
that no casing gives ("anti-Israeli" from "Anti-Israeli") keeps a tree on the form as written.

With `known_lemmas`, prediction prefers, among a word's `top_k` best rules that apply, the first
whose lemma was a lemma in training (kept from `initialize` as learned state): an edit that makes a
word no training lemma spells is more often a wrong edit than a new word. Where none of them makes
a known lemma, the best rule stands.
"""

from collections import Counter
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from spacy.language import Language
from spacy.pipeline._edit_tree_internals.edit_trees import EditTrees
from spacy.pipeline.edit_tree_lemmatizer import DEFAULT_EDIT_TREE_LEMMATIZER_MODEL, EditTreeLemmatizer
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.vocab import Vocab
from thinc.api import Model, SequenceCategoricalCrossentropy
from thinc.types import Floats2d

# How a lemma's letters are cased from its lowercased spelling, tried in this order (the first that
# gives the gold lemma is its casing): "form" copies the form's case letter by letter, so "AP" and
# "Pizza" keep theirs; "title" capitalises ("kerala" -> "Kerala"); "upper" is all capitals.
CASINGS = ("lower", "form", "title", "upper")
# The casing of a lemma that none of CASINGS gives: its tree edits the form as written.
VERBATIM = "verbatim"

Rule = Tuple[int, str]  # (edit tree id, casing)


def cased(lowered: str, form: str, casing: str) -> str:
    """`lowered` (a lowercase lemma) in `casing` (one of CASINGS), `form` being the word it came from."""
    if casing == "lower":
        return lowered
    if casing == "form":
        return "".join(
            char.upper() if position < len(form) and form[position].isupper() else char
            for position, char in enumerate(lowered)
        )
    if casing == "title":
        return lowered[:1].upper() + lowered[1:]
    if casing == "upper":
        return lowered.upper()
    raise ValueError(f"casing {casing!r} is not one of {', '.join(map(repr, CASINGS))}")


def lemma_casing(form: str, lemma: str) -> str:
    """The first of CASINGS that makes `lemma` from its lowercase spelling, else VERBATIM."""
    lowered = lemma.lower()
    return next((casing for casing in CASINGS if cased(lowered, form, casing) == lemma), VERBATIM)


def lemma_rule(trees: EditTrees, form: str, lemma: str) -> Rule:
    """The (tree, casing) that makes `lemma` from `form`, its tree added to `trees` if it is new."""
    casing = lemma_casing(form, lemma)
    if casing == VERBATIM:
        return trees.add(form, lemma), VERBATIM
    return trees.add(form.lower(), lemma.lower()), casing


def apply_rule(trees: EditTrees, rule: Rule, form: str) -> Optional[str]:
    """The lemma that `rule` makes from `form`, or None where its tree does not apply."""
    tree, casing = rule
    if casing == VERBATIM:
        return trees.apply(tree, form)
    lowered = trees.apply(tree, form.lower())
    return None if lowered is None else cased(lowered, form, casing)


def is_rule(label) -> bool:
    """Whether a saved label is a [tree id, casing] pair (a stock trainable_lemmatizer's is a bare tree id)."""
    return (
        isinstance(label, (list, tuple))
        and len(label) == 2
        and isinstance(label[0], int)
        and label[1] in (*CASINGS, VERBATIM)
    )


class CasedEditTreeLemmatizer(EditTreeLemmatizer):
    """spaCy's EditTreeLemmatizer whose labels are (edit tree on lowercased text, casing) rules
    (module docstring). Model, training and settings are the stock component's, and `known_lemmas`;
    a gold lemma no label gives is left out of the loss (the stock one trains it towards label 0)."""

    def __init__(self, *args, known_lemmas: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.known_lemmas = known_lemmas
        self.training_lemmas: frozenset = frozenset()

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp=None, labels: Optional[Dict] = None):
        """The stock initialization, and the training lemmas kept for `known_lemmas`."""
        lemmas = {token.lemma_ for example in get_examples() for token in example.reference if token.lemma != 0}
        self.cfg["training_lemmas"] = sorted(lemmas)
        super().initialize(get_examples, nlp=nlp, labels=labels)
        self._index_labels()

    def get_loss(self, examples: Iterable[Example], scores: List[Floats2d]) -> Tuple[float, List[Floats2d]]:
        validate_examples(examples, "CasedEditTreeLemmatizer.get_loss")
        loss_func = SequenceCategoricalCrossentropy(normalize=False, missing_value=-1)
        truths = [
            [
                -1 if not gold else self.tree2label.get(lemma_rule(self.trees, token.text, gold), -1)
                for token, gold in zip(eg.predicted, eg.get_aligned("LEMMA", as_string=True))
            ]
            for eg in examples
        ]
        d_scores, loss = loss_func(scores, truths)
        if self.model.ops.xp.isnan(loss):
            raise ValueError(f"{self.name}: the loss is NaN (the learning rate may be too high)")
        return float(loss), d_scores

    def predict(self, docs: Iterable[Doc]) -> List[np.ndarray]:
        """Per Doc, each token's label: the best of its top_k labels whose tree applies, or -1."""
        docs = list(docs)
        if not any(len(doc) for doc in docs):
            return [np.zeros((0,), dtype="i") for _ in docs]
        scores = self.model.predict(docs)
        return [self.applicable_labels(doc, self.numpy_ops.asarray(row)) for doc, row in zip(docs, scores)]

    def applicable_labels(self, doc: Doc, scores: np.ndarray) -> np.ndarray:
        """Each token's first label, in descending score among its top_k, whose tree applies (with
        known_lemmas, the first whose lemma is a training lemma, where one is); -1 if none applies."""
        top_k = min(self.top_k, scores.shape[1])
        ranked = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
        labels = np.full(len(doc), -1, dtype="i")
        for position, token in enumerate(doc):
            for label in ranked[position]:
                lemma = self.lemma_of(int(label), token.text)
                if lemma is None:
                    continue
                if labels[position] == -1:
                    labels[position] = label
                if not self.known_lemmas or lemma in self.training_lemmas:
                    labels[position] = label
                    break
        return labels

    def lemma_of(self, label: int, form: str) -> Optional[str]:
        """The lemma that label `label` makes from `form`, or None where its tree does not apply."""
        return apply_rule(self.trees, self.cfg["labels"][label], form)

    def set_annotations(self, docs: Iterable[Doc], batch_labels: Sequence[np.ndarray]) -> None:
        for doc, labels in zip(docs, batch_labels):
            for token, label in zip(doc, labels):
                if self.overwrite or token.lemma == 0:
                    if label != -1:
                        token.lemma_ = self.lemma_of(int(label), token.text)
                    elif self.backoff is not None:
                        token.lemma = getattr(token, self.backoff)

    def _labels_from_data(self, get_examples: Callable[[], Iterable[Example]]) -> None:
        """A label for every rule that makes at least min_tree_freq of the training lemmas (counted in a
        scratch store, so the rules below the cut-off leave no trees or strings behind)."""
        trees = EditTrees(Vocab().strings)
        frequencies: Counter = Counter()
        example_pairs: Dict[Rule, Tuple[str, str]] = {}
        for example in get_examples():
            for token in example.reference:
                if token.lemma != 0:
                    rule = lemma_rule(trees, token.text, token.lemma_)
                    frequencies[rule] += 1
                    example_pairs[rule] = (token.text, token.lemma_)
        for rule, frequency in frequencies.items():
            if frequency >= self.min_tree_freq:
                self._pair2label(*example_pairs[rule], add_label=True)

    def _pair2label(self, form: str, lemma: str, add_label: bool = False) -> Optional[int]:
        rule = lemma_rule(self.trees, form, lemma)
        if rule not in self.tree2label:
            if not add_label:
                return None
            self.tree2label[rule] = len(self.cfg["labels"])
            self.cfg["labels"].append(rule)
        return self.tree2label[rule]

    def _add_labels(self, labels: Dict) -> None:
        if "labels" in labels:  # rules read from JSON are lists, which the stock method cannot index by
            rules = [tuple(rule) if isinstance(rule, list) else rule for rule in labels["labels"]]
            labels = {**labels, "labels": rules}
        super()._add_labels(labels)  # its checks: labels and trees both there, the trees valid
        self._index_labels()

    def from_bytes(self, bytes_data, *, exclude=tuple()):
        super().from_bytes(bytes_data, exclude=exclude)
        self._index_labels()
        return self

    def from_disk(self, path, exclude=tuple()):
        super().from_disk(path, exclude=exclude)
        self._index_labels()
        return self

    def _index_labels(self) -> None:
        """Labels as (tree, casing) tuples (JSON gives lists), the rule -> label index and the training
        lemmas' set, after initializing or loading."""
        if self.known_lemmas and "training_lemmas" not in self.cfg:
            raise ValueError(
                f"{self.name}: known_lemmas = true needs the training lemmas, which this lemmatizer was saved "
                "without (initialized before they were kept): initialize it again, or set known_lemmas = false"
            )
        self.training_lemmas = frozenset(self.cfg.get("training_lemmas", ()))
        labels = self.cfg["labels"]
        bad = next((label for label in labels if not is_rule(label)), None)
        if bad is not None:
            shown = list(bad) if isinstance(bad, (list, tuple)) else bad
            raise ValueError(f"{self.name}: label {shown!r} is not a [tree, casing] rule of pairatt_lemmatizer")
        rules = [(int(tree), casing) for tree, casing in labels]
        self.cfg["labels"] = rules
        self.tree2label = {rule: label for label, rule in enumerate(rules)}


@Language.factory(
    "pairatt_lemmatizer",
    assigns=["token.lemma"],
    requires=[],
    default_config={
        "model": DEFAULT_EDIT_TREE_LEMMATIZER_MODEL,
        "backoff": "orth",
        "min_tree_freq": 3,
        "overwrite": False,
        "top_k": 1,
        "known_lemmas": False,
        "scorer": {"@scorers": "spacy.lemmatizer_scorer.v1"},
    },
    default_score_weights={"lemma_acc": 1.0},
)
def make_pairatt_lemmatizer(
    nlp: Language,
    model: Model,
    name: str,
    backoff: Optional[str],
    min_tree_freq: int,
    overwrite: bool,
    top_k: int,
    known_lemmas: bool,
    scorer: Optional[Callable],
) -> CasedEditTreeLemmatizer:
    """`pairatt_lemmatizer`: trainable_lemmatizer's settings, cased edit-tree labels; known_lemmas:
    prefer, among the top_k rules that apply, one that makes a training lemma (module docstring)."""
    return CasedEditTreeLemmatizer(
        nlp.vocab,
        model,
        name,
        backoff=backoff,
        min_tree_freq=min_tree_freq,
        overwrite=overwrite,
        top_k=top_k,
        known_lemmas=known_lemmas,
        scorer=scorer,
    )
