"""Which token windows the transformer sees: one per sentence, long sentences cut with overlap."""

from functools import partial
from typing import Callable, Iterable, List

from spacy.tokens import Doc, Span


def sentence_spans(doc: Doc) -> List[Span]:
    """The Doc's sentences when boundaries are set, else the whole Doc as one sentence."""
    if len(doc) == 0:
        return []
    if doc.has_annotation("SENT_START"):
        return list(doc.sents)
    return [doc[:]]


def window_starts(length: int, window: int, stride: int) -> List[int]:
    """Start offsets of windows of `window` tokens, `stride` apart, the last one ending at `length`."""
    if length <= window:
        return [0]
    starts = list(range(0, length - window, stride))
    starts.append(length - window)
    return starts


def get_sent_windows(docs: Iterable[Doc], window: int, stride: int) -> List[List[Span]]:
    """One span per sentence; a sentence longer than `window` tokens becomes overlapping windows.

    Every pair of words of a short sentence then shares exactly one window, which is what the pair
    features need; in a long sentence, words further apart than the overlap share none.
    """
    spans: List[List[Span]] = []
    for doc in docs:
        doc_spans = []
        for sent in sentence_spans(doc):
            for start in window_starts(len(sent), window, stride):
                doc_spans.append(sent[start : start + window])
        spans.append(doc_spans)
    return spans


def make_sent_windows(window: int = 128, stride: int = 96) -> Callable[[List[Doc]], List[List[Span]]]:
    """Registered as `spacy-pairatt.sent_windows.v1`."""
    if window < 1 or not 0 < stride <= window:
        raise ValueError(
            f"sent_windows needs window >= 1 and 0 < stride <= window, got window={window}, stride={stride}"
        )
    return partial(get_sent_windows, window=window, stride=stride)
