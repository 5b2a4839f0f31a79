"""pairatt_segmenter (spacy_pairatt/components/segmenter.py) and its training noise
(spacy_pairatt/training/augment.py), on EWT dev documents and on odd input."""

import json
import random

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from spacy_pairatt.components.segmenter import sentence_starts
from spacy_pairatt.corpora.doc_copies import edited_copy
from spacy_pairatt.corpora.ud_documents import annotated_paragraph_docs, iter_document_docs, read_ud_documents
from spacy_pairatt.integration.load_settings import set_setting
from spacy_pairatt.training.augment import make_raw_text_noise, noised
from tests.conftest import REPO, UD_DIR, small_segmenter_model

EWT_DEV = UD_DIR / "en_ewt-ud-dev.conllu"
SMALL_SEGMENTER = {"model": small_segmenter_model(width=32, rows=(500, 100))}


@pytest.fixture(scope="module")
def dev_docs():
    if not EWT_DEV.exists():
        pytest.skip(f"UD English-EWT not found at {EWT_DEV}")
    vocab = spacy.blank("en").vocab
    return list(iter_document_docs(vocab, read_ud_documents(EWT_DEV.read_text(encoding="utf8").splitlines())))


@pytest.fixture(scope="module")
def trained_segmenter(dev_docs):
    """A small segmenter trained for 60 steps on 120 EWT dev documents: enough to find full stops."""
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en", vocab=dev_docs[0].vocab)
    nlp.add_pipe("pairatt_segmenter", name="senter", config=SMALL_SEGMENTER)
    examples = [Example(unannotated(d), d) for d in dev_docs[:120]]
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.01
    rng = random.Random(0)
    for _ in range(60):
        nlp.update(rng.sample(examples, 8), sgd=optimizer)
    return nlp


def unannotated(doc: Doc) -> Doc:
    return Doc(doc.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc])


def test_a_paragraph_break_starts_a_sentence_and_whitespace_never_does():
    nlp = spacy.blank("en")
    doc = nlp.make_doc("Hello there\n\nnext line \n more")
    texts = [token.text for token in doc]
    assert texts == ["Hello", "there", "\n\n", "next", "line", "\n ", "more"]
    never = sentence_starts(doc, np.zeros(len(doc)), threshold=0.5)
    assert never.tolist() == [1, 0, 0, 1, 0, 0, 0]  # the break alone; a single newline is the model's call
    always = sentence_starts(doc, np.ones(len(doc)), threshold=0.5)
    assert always.tolist() == [1, 1, 0, 1, 1, 0, 1]  # whitespace tokens never start one


def test_no_sentence_starts_inside_a_multiword_token():
    nlp = spacy.blank("en")
    doc = nlp.make_doc("North Korea's leader didn't come")
    assert [token.text for token in doc] == ["North", "Korea", "'s", "leader", "did", "n't", "come"]
    starts = sentence_starts(doc, np.ones(len(doc)), threshold=0.5)
    assert starts.tolist() == [1, 1, 0, 1, 1, 0, 1]  # not at 's or n't, the words UD writes inside Korea's, didn't


def test_leading_whitespace_belongs_to_the_first_sentence():
    doc = spacy.blank("en").make_doc("\n\n  Hello world")
    assert doc[0].is_space
    starts = sentence_starts(doc, np.ones(len(doc)), 0.5)
    first_word = next(token.i for token in doc if not token.is_space)
    assert starts[0] == 1 and not starts[1 : first_word + 1].any()


def test_the_threshold_moves_the_decision():
    doc = spacy.blank("en").make_doc("a b c d")
    probabilities = np.array([0.9, 0.2, 0.4, 0.6])
    assert sentence_starts(doc, probabilities, 0.5).tolist() == [1, 0, 0, 1]
    assert sentence_starts(doc, probabilities, 0.3).tolist() == [1, 0, 1, 1]
    assert sentence_starts(doc, probabilities, 1.0).tolist() == [1, 0, 0, 0]


def test_a_threshold_outside_zero_to_one_is_refused():
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="pairatt_segmenter: threshold must be a number in"):
        nlp.add_pipe("pairatt_segmenter", config={"threshold": 1.5})
    nlp.add_pipe("pairatt_segmenter")
    with pytest.raises(ValueError, match="pairatt_segmenter: threshold must be a number in"):
        set_setting(nlp, "pairatt_segmenter", "threshold", -0.1)


def test_the_trained_segmenter_splits_ewt_dev_paragraphs(trained_segmenter, dev_docs):
    """Held-out EWT dev documents (not among the 120 trained on): most gold sentence starts found."""
    nlp = trained_segmenter
    gold = dev_docs[200:260]
    predicted = list(nlp.pipe(doc.text for doc in gold))
    assert [doc.text for doc in predicted] == [doc.text for doc in gold]
    found = sum(
        p[t.i].is_sent_start for g, p in zip(gold, predicted) for t in g if t.is_sent_start and len(p) == len(g)
    )
    total = sum(t.is_sent_start for g in gold for t in g)
    print(f"found {found} of {total}")
    assert found / total > 0.6


@pytest.mark.parametrize(
    "text",
    ["", " ", "\n\n\n", "a", ".", "\n\nx\n\n", " ".join(["word"] * 5000), "Hi.\n\n\n\nBye.", "a\n\n\n\n"],
    ids=["empty", "space", "blank lines", "one char", "full stop", "char in breaks", "5000 words", "breaks", "tail"],
)
def test_odd_input_gives_whole_sentences_of_words(trained_segmenter, text):
    doc = trained_segmenter(text)
    assert doc.text == text
    sentences = list(doc.sents) if len(doc) else []
    assert sum(len(sentence) for sentence in sentences) == len(doc)
    assert all(any(not token.is_space for token in s) for s in sentences[1:])
    assert not any(token.is_sent_start and token.is_space and token.i for token in doc)
    if "\n\n" in text.strip():
        after_breaks = [t.i + 1 for t in doc[:-1] if t.is_space and t.text.count("\n") >= 2 and t.i > 0]
        assert all(doc[i].is_sent_start for i in after_breaks if not doc[i].is_space)


def test_the_threshold_is_on_the_probability_of_a_start_not_the_models_logit(trained_segmenter, dev_docs):
    """spaCy's Tagger.v2 with normalize = false outputs logits at inference; the threshold of 0.5 must
    then mean the argmax, and each threshold the softmax probability it names."""
    segmenter = trained_segmenter.get_pipe("senter")
    docs = [unannotated(doc) for doc in dev_docs[200:230]]
    logits = [segmenter.model.ops.to_numpy(scores) for scores in segmenter.model.predict(docs)]
    assert any((doc_logits < 0).any() or (doc_logits > 1).any() for doc_logits in logits)  # not probabilities
    probabilities = segmenter.start_probabilities(docs)
    for doc_logits, doc_probabilities in zip(logits, probabilities):
        np.testing.assert_allclose(doc_probabilities, 1 / (1 + np.exp(doc_logits[:, 0] - doc_logits[:, 1])), rtol=1e-4)
    original = segmenter.threshold
    try:
        for threshold in (0.3, 0.5, 0.7):
            set_setting(trained_segmenter, "senter", "threshold", threshold)
            for doc, labels, doc_logits in zip(docs, segmenter.predict(docs), logits):
                # Words (no whitespace around them) after the first: the model's call alone.
                words = [t.i for t in doc if t.i > 1 and not t.is_space and not doc[t.i - 1].is_space]
                expected = 1 / (1 + np.exp(doc_logits[words, 0] - doc_logits[words, 1])) >= threshold
                assert labels[words].astype(bool).tolist() == expected.tolist()
                if threshold == 0.5:
                    assert expected.tolist() == (doc_logits[words, 1] > doc_logits[words, 0]).tolist()
    finally:
        set_setting(trained_segmenter, "senter", "threshold", original)


def test_a_model_that_outputs_probabilities_is_read_as_it_is(dev_docs):
    nlp = spacy.blank("en", vocab=dev_docs[0].vocab)
    model = {**small_segmenter_model(width=16, rows=(100, 50)), "normalize": True}
    segmenter = nlp.add_pipe("pairatt_segmenter", config={"model": model})
    examples = [Example(unannotated(d), d) for d in dev_docs[:10]]
    nlp.initialize(lambda: examples)
    randomise = np.random.default_rng(0)
    output_layer = segmenter.model.get_ref("output_layer")
    output_layer.set_param("W", randomise.normal(size=output_layer.get_param("W").shape).astype("f"))
    docs = [unannotated(d) for d in dev_docs[10:13]]
    for scores, probabilities in zip(segmenter.model.predict(docs), segmenter.start_probabilities(docs)):
        np.testing.assert_allclose(probabilities, segmenter.model.ops.to_numpy(scores)[:, 1])
        assert ((probabilities >= 0) & (probabilities <= 1)).all()


def test_sentence_starts_a_user_set_are_kept(trained_segmenter):
    doc = trained_segmenter.make_doc("One two three four")
    doc[2].is_sent_start = True
    doc[1].is_sent_start = False
    doc = trained_segmenter.get_pipe("senter")(doc)
    assert doc[2].is_sent_start and not doc[1].is_sent_start


def test_the_threshold_survives_saving(trained_segmenter, tmp_path):
    set_setting(trained_segmenter, "senter", "threshold", 0.25)
    trained_segmenter.to_disk(tmp_path / "segmenter")
    loaded = spacy.load(tmp_path / "segmenter")
    assert loaded.get_pipe("senter").threshold == 0.25
    text = "this is one sentence without a stop\n\nand a second paragraph"
    assert [s.text for s in loaded(text).sents] == [s.text for s in trained_segmenter(text).sents]


# --- training noise ---------------------------------------------------------------------------------


def test_noise_drops_final_punctuation_and_keeps_every_gold_start_on_its_word(dev_docs):
    doc = dev_docs[1]
    noisy = noised(doc, random.Random(0), drop_final=1.0, lowercase_start=0.0, space_change=0.0)
    sentences = list(doc.sents)
    finals = sum(1 for s in sentences[:-1] if [t for t in s if not t.is_space][-1].text in ".!?" and len(s) > 1)
    assert len(noisy) == len(doc) - finals and finals > 0
    assert [s[0].text for s in noisy.sents] == [s[0].text for s in sentences]
    assert len(list(noisy.sents)) == len(sentences)


def test_noise_lowercases_starts_and_moves_spaces(dev_docs):
    doc = dev_docs[1]
    lowered = noised(doc, random.Random(0), drop_final=0.0, lowercase_start=1.0, space_change=0.0)
    capitalised = [s[0].text for s in doc.sents if s[0].text[:1].isupper() and s[0].text[1:2].islower()]
    assert capitalised and all(
        s[0].text[:1].islower() for s in lowered.sents if s[0].text.lower() in map(str.lower, capitalised)
    )
    spaced = noised(doc, random.Random(0), drop_final=0.0, lowercase_start=0.0, space_change=1.0)
    assert [t.text for t in spaced] == [t.text for t in doc] and spaced.text != doc.text


def test_the_augmenter_keeps_each_example_and_adds_a_noised_copy_at_its_level(dev_docs):
    nlp = spacy.blank("en", vocab=dev_docs[0].vocab)
    examples = [Example(d.copy(), d) for d in dev_docs[:50]]
    random.seed(0)
    never = [eg for example in examples for eg in make_raw_text_noise(level=0.0)(nlp, example)]
    assert never == examples
    always = [eg for example in examples for eg in make_raw_text_noise(level=1.0, drop_final=1.0)(nlp, example)]
    assert len(always) == 2 * len(examples)
    for original, copy in zip(always[::2], always[1::2]):
        assert copy.reference.has_annotation("SENT_START") and not copy.predicted.has_annotation("SENT_START")
        assert [t.text for t in copy.predicted] == [t.text for t in copy.reference]
        assert len([t for t in copy.reference if t.text != "\n"]) <= len(original.reference)
    with pytest.raises(ValueError, match="raw_text_noise.v1: level must be a probability"):
        make_raw_text_noise(level=2)


def test_noise_wraps_lines_between_words_and_no_line_break_starts_a_sentence(dev_docs):
    doc = dev_docs[1]
    wrapped = noised(doc, random.Random(0), drop_final=0.0, lowercase_start=0.0, space_change=0.0, line_break=0.5)
    breaks = [token for token in wrapped if token.text == "\n"]
    assert breaks and not any(token.is_sent_start for token in breaks)
    assert [t.text for t in wrapped if t.text != "\n"] == [t.text for t in doc]
    assert [s[0].text for s in wrapped.sents] == [s[0].text for s in doc.sents]
    assert wrapped.text.replace("\n", " ") == doc.text.replace("\n", " ")


@pytest.fixture(scope="module")
def dev_paragraphs(dev_docs):
    """EWT dev's paragraphs with every annotation, as the UD pipeline trains on them (ud-docs --paragraphs)."""
    return annotated_paragraph_docs(dev_docs[0].vocab, EWT_DEV.read_text(encoding="utf8"))


ANNOTATIONS = ("TAG", "POS", "MORPH", "LEMMA", "DEP", "SENT_START")


def test_noise_on_parsed_paragraphs_moves_every_annotation_with_its_word(dev_paragraphs):
    """On the UD pipeline's Docs the noised copy keeps each word's tag, morphology, lemma, label and
    head word; a final mark is dropped only when no word hangs from it."""
    rng = random.Random(0)
    dropped = 0
    for doc in dev_paragraphs[:300]:
        noisy = noised(doc, rng, drop_final=1.0, lowercase_start=0.5, space_change=0.5)
        assert all(noisy.has_annotation(attr) for attr in ANNOTATIONS)
        finals = {s[-1].i for s in list(doc.sents)[:-1] if s[-1].text in ".!?" and len(s) > 1}
        kept = [t for t in doc if t.i not in finals or t.n_lefts + t.n_rights]
        dropped += len(doc) - len(noisy)
        assert len(noisy) == len(kept) and noisy.text.replace(" ", "").lower() == "".join(t.text for t in kept).lower()
        for old, new in zip(kept, noisy):
            assert (old.text.lower(), old.tag_, old.pos_, str(old.morph), old.lemma_, old.dep_, old.is_sent_start) == (
                new.text.lower(), new.tag_, new.pos_, str(new.morph), new.lemma_, new.dep_, new.is_sent_start
            )
            assert new.head.text.lower() == old.head.text.lower()
            assert new.head.i - new.i == kept.index(old.head) - kept.index(old)
    assert dropped > 100


def test_line_breaks_in_a_parsed_doc_are_refused_by_name(dev_paragraphs):
    """A wrapped line adds a whitespace token the gold tree has no head for: the UD pipeline's config
    sets line_break = 0, and a config that does not is told why."""
    with pytest.raises(ValueError, match="line_break adds whitespace tokens, which a parsed Doc has no gold head"):
        noised(dev_paragraphs[1], random.Random(0), 0.0, 0.0, 0.0, line_break=0.05)
    config = spacy.util.load_config(REPO / "configs" / "pipeline_minilm.cfg")
    assert config["corpora"]["train"]["augmenter"]["line_break"] == 0


def test_an_edited_copy_refuses_to_drop_a_head_of_a_kept_word(dev_paragraphs):
    doc = dev_paragraphs[1]
    root = next(doc.sents).root
    keep = [token.i != root.i for token in doc]
    with pytest.raises(ValueError, match="would lose their head: a dropped token heads them"):
        edited_copy(doc, [t.text for t in doc], [bool(t.whitespace_) for t in doc], keep)


# --- the threshold sweep and the pipelines it joins --------------------------------------------------


def test_the_sweep_scores_ewt_dev_raw_text_at_each_threshold_and_stores_the_best(trained_segmenter, tmp_path):
    from spacy_pairatt.cli import main

    model = tmp_path / "segmenter"
    trained_segmenter.to_disk(model)
    output = tmp_path / "sweep.json"
    main(
        [
            "segmenter-sweep",
            str(model),
            str(EWT_DEV),
            "--thresholds",
            "0.05",
            "0.5",
            "0.95",
            "--store",
            "--output",
            str(output),
            "--markdown",
            str(tmp_path / "sweep.md"),
        ]
    )
    sweep = json.loads(output.read_text(encoding="utf8"))
    rows = {row["threshold"]: row for row in sweep["rows"]}
    # the tokenizer does not depend on the threshold; more starts are guessed the lower it is
    assert len({(row["Tokens"], row["Words"]) for row in rows.values()}) == 1
    false = {t: sum(row["false"].values()) for t, row in rows.items()}
    missed = {t: sum(row["missed"].values()) for t, row in rows.items()}
    assert false[0.05] > false[0.5] > false[0.95] and missed[0.05] < missed[0.5] < missed[0.95]
    # a paragraph a Doc: no paragraph edge is ever missed
    assert all(row["missed"]["paragraph_edge"] == 0 for row in rows.values())
    best = max(rows.values(), key=lambda row: row["Sentences"])["threshold"]
    assert sweep["best"] == best and sweep["stored"] and "provenance" in sweep
    assert spacy.load(model).get_pipe("senter").threshold == best
    assert f"Best: **{best}**" in (tmp_path / "sweep.md").read_text(encoding="utf8")


def test_the_sweep_refuses_a_pipeline_without_a_segmenter(tmp_path):
    from spacy_pairatt.cli import main

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(tmp_path / "model")
    with pytest.raises(SystemExit, match="segmenter-sweep: error: the pipeline has 0 pairatt_segmenter components"):
        main(["segmenter-sweep", str(tmp_path / "model"), str(EWT_DEV)])


def test_the_sweep_keeps_members_only_of_an_ensemble(trained_segmenter, tmp_path):
    from spacy_pairatt.cli import main

    trained_segmenter.to_disk(tmp_path / "segmenter")
    refusal = "segmenter-sweep: error: the model is .* only an ensemble has members to keep"
    with pytest.raises(SystemExit, match=refusal):
        main(["segmenter-sweep", str(tmp_path / "segmenter"), str(EWT_DEV), "--members", "1"])
    with pytest.raises(SystemExit):  # argparse: a count is at least 1
        main(["segmenter-sweep", str(tmp_path / "segmenter"), str(EWT_DEV), "--members", "0"])


def test_assemble_puts_the_segmenter_in_place_of_a_pipelines_senter(trained_segmenter, tmp_path):
    from spacy_pairatt.packaging.shipped_pipeline import put_senter

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer", name="senter")
    nlp.add_pipe("entity_ruler")
    put_senter(nlp, trained_segmenter, "the segmenter")
    assert nlp.pipe_names == ["senter", "entity_ruler"]
    assert nlp.get_pipe_meta("senter").factory == "pairatt_segmenter"
    text = "one sentence here\n\nand another paragraph"
    assert [s.text for s in nlp(text).sents] == [s.text for s in trained_segmenter(text).sents]
    bare = spacy.blank("en")
    bare.add_pipe("entity_ruler")
    put_senter(bare, trained_segmenter, "the segmenter")
    assert bare.pipe_names == ["senter", "entity_ruler"]
    with pytest.raises(ValueError, match="the pipeline at elsewhere has no senter"):
        put_senter(bare, spacy.blank("en"), "elsewhere")
