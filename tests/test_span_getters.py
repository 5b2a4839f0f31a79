"""Transformer windows: one per sentence, long sentences cut with overlap."""

import pytest
import spacy

from spacy_pairatt.span_getters import get_sent_windows, make_sent_windows, window_starts


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
