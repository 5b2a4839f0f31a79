"""Checks of gold parses before training, so malformed data fails loudly instead of training silently.

spaCy accepts cycles, sentences without a root and heads pointing into another sentence in a Doc
(it derives sentence boundaries from the roots but does not reject the rest), and the loss would
otherwise just drop such arcs.
"""

from typing import Iterable, Optional, Union

import numpy as np
from spacy.attrs import DEP, HEAD, SENT_START
from spacy.tokens import Doc
from spacy.training import Example

TEXT_PREVIEW = 80


def validate_gold_parse(
    example: Union[Example, Doc],
    index: int,
    labels: Optional[Iterable[str]] = None,
    *,
    source: str = "training data",
) -> None:
    """Raise ValueError naming the example if its reference parse is not one tree per sentence.

    Checks cycles, several roots in one sentence, heads outside the token's sentence and, when
    `labels` is given, labels not among them. Tokens without an annotated head (partial annotation)
    are skipped: they count neither as roots nor as arcs.
    index and source only name the example in the message ("example 3 of the training data").
    """
    doc = example.reference if isinstance(example, Example) else example
    if len(doc) == 0 or not doc.has_annotation("DEP"):  # spaCy says an empty Doc has every annotation
        return
    problem = gold_parse_problem(doc, labels)
    if problem:
        raise ValueError(
            f"pairatt_parser: example {index} of the {source} "
            f"({doc.text[:TEXT_PREVIEW]!r}) has an invalid gold parse: {problem}"
        )


def gold_parse_problem(doc: Doc, labels: Optional[Iterable[str]] = None) -> Optional[str]:
    """What is wrong with the Doc's annotated arcs, or None when nothing is."""
    array = doc.to_array([HEAD, DEP, SENT_START])
    deps = array[:, 1]
    positions = np.arange(len(doc))
    heads = positions + array[:, 0].astype("int64")
    annotated = deps != 0
    sentence_ids = np.cumsum(array[:, 2].astype("int64") == 1)

    if labels is not None:
        known = np.array([doc.vocab.strings[label] for label in set(labels)], dtype="uint64")
        unknown = annotated & ~np.isin(deps, known)
        if unknown.any():
            i = int(np.argmax(unknown))
            return f"label {doc[i].dep_!r} on token {i} ({doc[i].text!r}) is not one of the model's {len(known)} labels"

    outside = annotated & (sentence_ids[heads] != sentence_ids)
    if outside.any():
        i = int(np.argmax(outside))
        return f"the head of token {i} ({doc[i].text!r}) is token {heads[i]}, outside its sentence"

    roots = annotated & (heads == positions)
    roots_per_sentence = np.bincount(sentence_ids[roots], minlength=sentence_ids[-1] + 1)
    if (roots_per_sentence > 1).any():
        sentence = int(np.argmax(roots_per_sentence > 1))
        tokens = np.flatnonzero(roots & (sentence_ids == sentence)).tolist()
        return f"tokens {tokens} are all roots of the same sentence"

    on_cycle = cycle_members(np.where(annotated, heads, positions))
    if on_cycle.any():
        return f"tokens {np.flatnonzero(on_cycle).tolist()} form a cycle"
    return None


def head_array_problem(heads: np.ndarray) -> Optional[str]:
    """What keeps one sentence's 1-based `heads` (0: the root) from being a single-rooted tree, or None.

    The check for arrays of heads, before any Doc exists (a corpus reader, a decoder's output);
    `gold_parse_problem` checks the arcs of a Doc.
    """
    n = len(heads)
    outside = (heads < 0) | (heads > n)
    if outside.any():
        word = int(np.argmax(outside))
        return f"word {word + 1} has head {heads[word]}, outside 0..{n}"
    positions = np.arange(n)
    self_headed = heads == positions + 1
    if self_headed.any():
        return f"words {(np.flatnonzero(self_headed) + 1).tolist()} are their own heads"
    roots = np.flatnonzero(heads == 0)
    if len(roots) == 0:
        return "no word has head 0: the sentence has no root"
    if len(roots) > 1:
        return f"words {(roots + 1).tolist()} all have head 0, expected one root"
    on_cycle = cycle_members(np.where(heads == 0, positions, heads - 1))
    if on_cycle.any():
        return f"words {(np.flatnonzero(on_cycle) + 1).tolist()} form a cycle"
    return None


def cycle_members(heads: np.ndarray) -> np.ndarray:
    """(n,) bool, True for the tokens lying on a cycle of `heads` (absolute; roots head themselves).

    Pointer jumping: after ceil(log2 n) squarings every token has moved at least n steps, so it
    sits on a root (a fixed point) or on a cycle; a cycle's members are the tokens it then reaches.
    """
    reached = heads
    for _ in range(max(len(heads), 1).bit_length()):
        reached = reached[reached]
    on_cycle = np.zeros(len(heads), dtype=bool)
    on_cycle[reached] = True
    return on_cycle & (heads != np.arange(len(heads)))
