"""Which token windows the transformer sees: one per sentence, long sentences cut with overlap.

Windows are cut by tokens in the config (`window`, `stride`) and again by wordpieces at run time
(`WordpieceBoundedSpans`): a window whose wordpieces exceed the encoder's positions would be
truncated by spacy-transformers, leaving the tokens past the cut without encoder input.
"""

from functools import partial
from typing import Callable, Iterable, List, Optional, Tuple

import numpy as np
from spacy.tokens import Doc, Span
from spacy_transformers.util import registry


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


@registry.span_getters("spacy-pairatt.sent_windows.v1")
def make_sent_windows(window: int = 128, stride: int = 96) -> Callable[[List[Doc]], List[List[Span]]]:
    """Registered as `spacy-pairatt.sent_windows.v1`."""
    if window < 1 or not 0 < stride <= window:
        raise ValueError(
            f"sent_windows needs window >= 1 and 0 < stride <= window, got window={window}, stride={stride}"
        )
    return partial(get_sent_windows, window=window, stride=stride)


class WordpieceBoundedSpans:
    """A span getter whose spans each fit the encoder: a span with more wordpieces than the
    encoder has positions is cut into overlapping spans that do, so every non-space token gets
    at least one wordpiece (a single token longer than the encoder alone is truncated, as before).

    Wraps the configured getter of a transformer model at run time because only the model knows
    its tokenizer, which is loaded at initialization. Consecutive pieces overlap by a quarter of
    the encoder's positions, so nearby words of a long window still share one.
    """

    def __init__(self, get_spans: Callable[[List[Doc]], List[List[Span]]], model):
        self.get_spans = get_spans
        self.model = model
        self.checked_window = False

    def __call__(self, docs: Iterable[Doc]) -> List[List[Span]]:
        return self.spans_and_lengths(docs)[0]

    def spans_and_lengths(self, docs: Iterable[Doc]) -> Tuple[List[List[Span]], Optional[np.ndarray]]:
        """The spans, and each one's wordpieces without special tokens (flat, in order; None before
        the model has a tokenizer): what the component batches by, without tokenizing again."""
        nested = self.get_spans(docs)
        tokenizer = self.model.tokenizer
        if tokenizer is None:
            return nested, None
        budget = wordpiece_budget(tokenizer, self.model)
        if not self.checked_window:
            check_window(self.get_spans, budget)
            self.checked_window = True
        lengths = wordpiece_counts(tokenizer, [span for spans in nested for span in spans])
        if (lengths <= budget).all():
            return nested, lengths
        too_long = iter(lengths > budget)
        nested = [
            [piece for span in spans for piece in (split_span(span, tokenizer, budget) if next(too_long) else [span])]
            for spans in nested
        ]
        return nested, wordpiece_counts(tokenizer, [span for spans in nested for span in spans])


def wordpiece_counts(tokenizer, spans: List[Span]) -> np.ndarray:
    """Wordpieces of each span's text, special tokens left out."""
    if not spans:
        return np.zeros(0, dtype="int64")
    encoded = tokenizer([span.text for span in spans], add_special_tokens=False, verbose=False)["input_ids"]
    return np.fromiter((len(ids) for ids in encoded), dtype="int64", count=len(spans))


def wordpiece_budget(tokenizer, model) -> int:
    """Wordpieces one span may hold: the encoder's positions less its special tokens.

    spacy-transformers truncates at `tokenizer.model_max_length`; some tokenizers leave that
    unset (a huge number), so the transformer's usable positions bound it too.
    """
    limit = tokenizer.model_max_length
    positions = usable_positions(getattr(model, "transformer", None))
    if positions is not None:
        limit = min(limit, positions)
    return int(limit) - tokenizer.num_special_tokens_to_add(pair=False)


def usable_positions(transformer) -> Optional[int]:
    """How many positions an encoder can number: `max_position_embeddings`, less the ids up to
    its padding id where it numbers positions after that id (RoBERTa and MPNet: 514 - 2 = 512;
    BERT: all 512). None for an encoder without position embeddings."""
    positions: Optional[int] = getattr(getattr(transformer, "config", None), "max_position_embeddings", None)
    if positions is None:
        return None
    embeddings = getattr(getattr(transformer, "embeddings", None), "position_embeddings", None)
    padding_idx = getattr(embeddings, "padding_idx", None)
    return positions if padding_idx is None else positions - (padding_idx + 1)


def check_window(get_spans: Callable, budget: int) -> None:
    """A `window` of more tokens than the encoder's wordpiece budget can never fit: every token
    takes at least one wordpiece."""
    window = getattr(get_spans, "keywords", {}).get("window")
    if window is not None and window > budget:
        raise ValueError(
            f"get_spans.window = {window} tokens cannot fit the encoder: it takes at most {budget} "
            f"wordpieces per span besides its special tokens, and every token is at least one wordpiece; "
            f"set window <= {budget}"
        )


def token_wordpieces(span: Span, tokenizer) -> np.ndarray:
    """Number of wordpieces of each token of `span`, as the tokenizer splits the span's text."""
    starts = np.fromiter((token.idx for token in span), dtype="int64", count=len(span)) - span.start_char
    if tokenizer.is_fast:
        offsets = tokenizer(span.text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)[
            "offset_mapping"
        ]
        piece_starts = np.fromiter((start for start, _ in offsets), dtype="int64", count=len(offsets))
        owners = np.searchsorted(starts, piece_starts, side="right") - 1
        return np.bincount(owners[owners >= 0], minlength=len(span))
    encoded = tokenizer([token.text for token in span], add_special_tokens=False, verbose=False)["input_ids"]
    return np.fromiter((len(ids) for ids in encoded), dtype="int64", count=len(span))


def split_span(span: Span, tokenizer, budget: int) -> List[Span]:
    """`span` as consecutive overlapping spans of at most `budget` wordpieces each (a token over
    the budget alone), the next one starting where the current one is three quarters full."""
    ends = np.cumsum(token_wordpieces(span, tokenizer))
    pieces = []
    start = 0
    while True:
        before = ends[start - 1] if start else 0
        end = max(int(np.searchsorted(ends, before + budget, side="right")), start + 1)
        pieces.append(span[start:end])
        if end >= len(span):
            return pieces
        restart = int(np.searchsorted(ends, before + budget * 3 // 4, side="right"))
        start = min(max(restart, start + 1), end)
