"""pairatt_lemmatizer: cased edit-tree rules on real EWT lemmas, the component's training, labels and
serialization (on spaCy's small CNN model: what is checked is the component, not accuracy)."""

import numpy as np
import pytest
import spacy
import srsly
from spacy.pipeline._edit_tree_internals.edit_trees import EditTrees
from spacy.util import minibatch
from spacy.vocab import Vocab

from spacy_pairatt.components.lemmatizer import VERBATIM, apply_rule, cased, lemma_casing, lemma_rule
from tests.conftest import UD_DIR, examples_from_docs, read_conllu_sentences


def ewt_pairs(limit: int):
    path = UD_DIR / "en_ewt-ud-train.conllu"
    if not path.exists():
        pytest.skip(f"UD English-EWT not found at {path}")
    return [(token.text, token.lemma_) for doc in read_conllu_sentences(path, limit) for token in doc if token.lemma_]


@pytest.mark.parametrize(
    "form, lemma, casing",
    [
        ("The", "the", "lower"),
        ("AP", "AP", "form"),
        ("Pizza", "Pizza", "form"),
        ("kerala", "Kerala", "title"),
        ("ibm", "IBM", "upper"),
        ("Anti-Israeli", "anti-Israeli", VERBATIM),
    ],
)
def test_a_lemma_gets_the_first_casing_that_makes_it(form, lemma, casing):
    assert lemma_casing(form, lemma) == casing
    if casing != VERBATIM:
        assert cased(lemma.lower(), form, casing) == lemma


def test_every_ewt_lemma_comes_back_from_its_rule():
    """The rules lose nothing: each (form, lemma) of 2,000 EWT train sentences is remade from its rule."""
    trees = EditTrees(Vocab().strings)
    pairs = ewt_pairs(2000)
    assert all(apply_rule(trees, lemma_rule(trees, form, lemma), form) == lemma for form, lemma in pairs)
    # and a capital letter's lowercasing is one rule, where spaCy's trees need one per first letter
    assert lemma_rule(trees, "The", "the") == lemma_rule(trees, "What", "what") == lemma_rule(trees, "the", "the")
    assert trees.add("The", "the") != trees.add("What", "what")


def test_the_cased_rules_are_fewer_than_spacys_trees_on_ewt():
    trees = EditTrees(Vocab().strings)
    pairs = ewt_pairs(2000)
    rules = {lemma_rule(trees, form, lemma) for form, lemma in pairs}
    spacy_trees = {trees.add(form, lemma) for form, lemma in pairs}
    assert len(rules) < 0.8 * len(spacy_trees)


def test_a_casing_outside_the_set_is_refused_by_name():
    with pytest.raises(ValueError, match="casing 'mixed' is not one of"):
        cased("the", "The", "mixed")


@pytest.fixture(scope="module")
def trained_lemmatizer():
    """pairatt_lemmatizer on spaCy's default CNN, 8 epochs over 150 EWT train sentences in batches of 8."""
    path = UD_DIR / "en_ewt-ud-train.conllu"
    if not path.exists():
        pytest.skip(f"UD English-EWT not found at {path}")
    nlp = spacy.blank("en")
    nlp.add_pipe("pairatt_lemmatizer", name="lemmatizer", config={"min_tree_freq": 1})
    docs = read_conllu_sentences(path, 150)
    examples = examples_from_docs(nlp, docs)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(8):
        for batch in minibatch(examples, 8):
            nlp.update(batch, sgd=optimizer, drop=0.0)
    return nlp, docs


def test_the_lemmatizer_learns_its_training_lemmas(trained_lemmatizer):
    nlp, docs = trained_lemmatizer
    predicted = [
        (token.lemma_, gold.lemma_) for eg in examples_from_docs(nlp, docs) for token, gold in zip(nlp(eg.x), eg.y)
    ]
    assert sum(guess == gold for guess, gold in predicted) / len(predicted) > 0.9


def test_labels_are_tree_and_casing_rules_and_come_back_from_label_data(trained_lemmatizer):
    nlp, docs = trained_lemmatizer
    lemmatizer = nlp.get_pipe("lemmatizer")
    assert {casing for _, casing in lemmatizer.labels} >= {"lower", "form"}
    again = spacy.blank("en")
    again.add_pipe("pairatt_lemmatizer", name="lemmatizer")
    examples = examples_from_docs(again, docs[:5])
    label_data = srsly.json_loads(srsly.json_dumps(lemmatizer.label_data))  # as `spacy init labels` writes it
    again.get_pipe("lemmatizer").initialize(lambda: examples, nlp=again, labels=label_data)
    assert again.get_pipe("lemmatizer").labels == lemmatizer.labels


def test_the_lemmatizer_saves_and_loads_with_the_same_lemmas(trained_lemmatizer, tmp_path):
    nlp, docs = trained_lemmatizer
    texts = [doc.text for doc in docs[:20]]
    nlp.to_disk(tmp_path / "pipeline")
    from_bytes = spacy.blank("en")
    from_bytes.add_pipe("pairatt_lemmatizer", name="lemmatizer")
    from_bytes.from_bytes(nlp.to_bytes())
    for loaded in (spacy.load(tmp_path / "pipeline"), from_bytes):
        assert loaded.get_pipe("lemmatizer").labels == nlp.get_pipe("lemmatizer").labels
        for text in texts:
            assert [t.lemma_ for t in loaded(text)] == [t.lemma_ for t in nlp(text)]


@pytest.mark.parametrize(
    "label, shown",
    [(["TREE", "mixed"], r"\[\d+, 'mixed'\]"), (["TREE"], r"\[\d+\]"), ("TREE", r"\d+")],
    ids=["unknown casing", "no casing", "a trainable_lemmatizer's tree id"],
)
def test_a_saved_label_that_is_no_rule_is_refused_in_one_line(trained_lemmatizer, tmp_path, label, shown):
    nlp, _ = trained_lemmatizer
    nlp.to_disk(tmp_path / "pipeline")
    cfg = tmp_path / "pipeline" / "lemmatizer" / "cfg"
    settings = srsly.read_json(cfg)
    tree = settings["labels"][0][0]
    settings["labels"][0] = tree if label == "TREE" else [tree if part == "TREE" else part for part in label]
    srsly.write_json(cfg, settings)
    with pytest.raises(ValueError, match=rf"lemmatizer: label {shown} is not a \[tree, casing\] rule"):
        spacy.load(tmp_path / "pipeline")


def test_an_empty_text_gets_no_tokens_and_a_word_no_tree_fits_keeps_its_form(trained_lemmatizer):
    nlp, _ = trained_lemmatizer
    assert len(nlp("")) == 0
    lemmatizer = nlp.get_pipe("lemmatizer")
    doc = nlp.make_doc("Xq")
    lemmatizer.set_annotations([doc], [np.array([-1])])  # what predict gives where no label's tree applies
    assert doc[0].lemma_ == "Xq"  # the backoff: the form


def test_known_lemmas_prefers_a_rule_that_makes_a_training_lemma(trained_lemmatizer):
    """Among a word's top_k rules that apply, known_lemmas takes the first that makes a lemma seen in
    training, and keeps the best rule where none does; without it the best applicable rule wins."""
    nlp, _ = trained_lemmatizer
    lemmatizer = nlp.get_pipe("lemmatizer")
    assert "be" in lemmatizer.training_lemmas and "xqzv" not in lemmatizer.training_lemmas
    doc = nlp.make_doc("was xqzvs")
    keep = lemmatizer.tree2label[lemma_rule(lemmatizer.trees, "was", "was")]  # the identity rule
    to_be = lemmatizer.tree2label[lemma_rule(lemmatizer.trees, "was", "be")]
    plural = lemmatizer.tree2label.get(lemma_rule(lemmatizer.trees, "cats", "cat"))
    assert plural is not None
    scores = np.zeros((2, len(lemmatizer.labels)), dtype="f")
    scores[:, keep], scores[:, to_be], scores[:, plural] = 3.0, 2.0, 1.0  # "was" first, "be" second
    lemmatizer.top_k, lemmatizer.known_lemmas = 3, False
    chosen = lemmatizer.applicable_labels(doc, scores)
    assert [lemmatizer.lemma_of(int(label), token.text) for label, token in zip(chosen, doc)] == ["was", "xqzvs"]
    lemmatizer.known_lemmas = True
    chosen = lemmatizer.applicable_labels(doc, scores)
    assert lemmatizer.lemma_of(int(chosen[0]), "was") == "be"  # "was" is no training lemma, "be" is
    assert lemmatizer.lemma_of(int(chosen[1]), "xqzvs") == "xqzvs"  # neither "xqzvs" nor "xqzv" known: the best
    lemmatizer.top_k, lemmatizer.known_lemmas = 1, False


def test_known_lemmas_is_a_setting_given_at_load_time_and_refused_without_the_lemmas(trained_lemmatizer, tmp_path):
    nlp, docs = trained_lemmatizer
    nlp.to_disk(tmp_path / "pipeline")
    override = {"components": {"lemmatizer": {"known_lemmas": True, "top_k": 4}}}
    loaded = spacy.load(tmp_path / "pipeline", config=override)
    lemmatizer = loaded.get_pipe("lemmatizer")
    assert (lemmatizer.known_lemmas, lemmatizer.top_k) == (True, 4)
    assert lemmatizer.training_lemmas == nlp.get_pipe("lemmatizer").training_lemmas
    assert len(loaded(docs[0].text)) == len(docs[0])
    cfg = tmp_path / "pipeline" / "lemmatizer" / "cfg"
    settings = srsly.read_json(cfg)
    del settings["training_lemmas"]
    srsly.write_json(cfg, settings)
    assert spacy.load(tmp_path / "pipeline").get_pipe("lemmatizer").training_lemmas == frozenset()
    with pytest.raises(ValueError, match="lemmatizer: known_lemmas = true needs the training lemmas"):
        spacy.load(tmp_path / "pipeline", config=override)
