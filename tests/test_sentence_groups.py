"""`spacy-pairatt.SentenceGroupsCorpus.v1` on UD EWT: the multi-sentence Docs a senter trains on."""

import pytest
import spacy
from conftest import UD_DIR, write_first_sentences
from spacy.attrs import DEP, HEAD, LEMMA, MORPH, POS, SENT_START, TAG
from spacy.tokens import DocBin
from spacy.training.converters import conllu_to_docs
from spacy.util import registry

ANNOTATIONS = [HEAD, DEP, SENT_START, TAG, POS, LEMMA, MORPH]
N_SENTENCES = 95


@pytest.fixture(scope="module")
def ewt_dev_sentences(tmp_path_factory):
    """The first 95 EWT dev sentences: their CoNLL-U text and a .spacy file of one sentence per Doc."""
    if not (UD_DIR / "en_ewt-ud-dev.conllu").exists():
        pytest.skip(f"UD English-EWT not found at {UD_DIR}")
    folder = tmp_path_factory.mktemp("sentence_groups")
    conllu = write_first_sentences(UD_DIR / "en_ewt-ud-dev.conllu", N_SENTENCES, folder / "dev.conllu")
    text = conllu.read_text(encoding="utf8")
    DocBin(docs=conllu_to_docs(text, n_sents=1, no_print=True)).to_disk(folder / "dev.spacy")
    return text, folder / "dev.spacy"


def read_groups(path, n_sents, offsets):
    reader = registry.readers.get("spacy-pairatt.SentenceGroupsCorpus.v1")(path, n_sents=n_sents, offsets=offsets)
    return list(reader(spacy.blank("en")))


def test_offset_zero_groups_as_spacy_convert_does(ewt_dev_sentences):
    text, path = ewt_dev_sentences
    converted = list(conllu_to_docs(text, n_sents=10, no_print=True))
    grouped = [example.reference for example in read_groups(path, 10, [0])]
    assert len(grouped) == len(converted) == 10
    for ours, theirs in zip(grouped, converted):
        assert ours.text == theirs.text
        assert (ours.to_array(ANNOTATIONS) == theirs.to_array(ANNOTATIONS)).all()


def test_every_offset_groups_all_sentences_and_moves_the_doc_openings(ewt_dev_sentences):
    _, path = ewt_dev_sentences
    examples = read_groups(path, 10, [0, 5])
    at_zero, at_five = examples[:10], examples[10:]
    assert [len(list(eg.reference.sents)) for eg in at_five] == [5] + [10] * 9
    for grouping in (at_zero, at_five):
        assert sum(len(list(eg.reference.sents)) for eg in grouping) == N_SENTENCES
        assert " ".join(eg.reference.text.strip() for eg in grouping) == " ".join(
            eg.reference.text.strip() for eg in at_zero
        )
    # The sentence that opens the second Doc at offset 0 follows five others at offset 5.
    opening = at_zero[1].reference[0]
    shifted = at_five[1].reference
    starts = [sent.start for sent in shifted.sents]
    assert shifted[starts[5]].text == opening.text and starts[5] > 0
    for example in examples:  # the pipeline sees the text only
        assert example.predicted.text == example.reference.text
        assert not example.predicted.has_annotation("SENT_START")


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"n_sents": 0}, "n_sents must be at least 1"),
        ({"offsets": [10]}, r"offsets=\[10\]"),
        ({"offsets": []}, "non-empty"),
    ],
)
def test_bad_settings_are_refused_by_name(ewt_dev_sentences, settings, message):
    _, path = ewt_dev_sentences
    with pytest.raises(ValueError, match=message):
        read_groups(path, **{"n_sents": 10, "offsets": [0], **settings})


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="no such file .*missing.spacy"):
        read_groups(tmp_path / "missing.spacy", 10, [0])
