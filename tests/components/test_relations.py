"""`pairatt_rel` and `doc._.relations` on a tiny random BERT and real SemEval-2010 Task 8 sentences."""

import pickle
import random

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example
from thinc.api import Adam, fix_random_seed

from spacy_pairatt.corpora.semeval import TRAIN_FILE, read_semeval
from spacy_pairatt.integration.doc_relations import Relation, entity_mentions, register_relations_extension
from spacy_pairatt.integration.load_settings import set_setting
from spacy_pairatt.training.corpus import with_candidate_spans
from tests.conftest import DATA, REPO, make_transformer_pipeline

SEMEVAL_DIR = DATA / "semeval2010_task8"


@pytest.fixture(scope="module")
def semeval_docs():
    path = SEMEVAL_DIR / TRAIN_FILE
    if not path.exists():
        pytest.skip(f"SemEval-2010 Task 8 not found at {path}")
    docs = []
    for doc in read_semeval(path):
        docs.append(doc)
        if len(docs) == 24:
            return docs


def relation_pipeline(encoder, config=None):
    nlp = make_transformer_pipeline(encoder)
    nlp.add_pipe("pairatt_rel", config=config or {})
    return nlp


def given_entities(nlp, docs, spans_key="ents"):
    return [Example(with_candidate_spans(doc, spans_key), doc) for doc in docs]


def train(nlp, examples, n_iter, learn_rate=1e-3):
    optimizer = Adam(learn_rate)
    losses_per_epoch = []
    for _ in range(n_iter):
        random.shuffle(examples)
        losses = {}
        for batch in spacy.util.minibatch(examples, 8):
            nlp.update(batch, sgd=optimizer, losses=losses)
        losses_per_epoch.append(losses["pairatt_rel"])
    return losses_per_epoch


@pytest.fixture(scope="module")
def trained(tiny_bert_dir, semeval_docs):
    fix_random_seed(0)
    random.seed(0)
    nlp = relation_pipeline(tiny_bert_dir)
    examples = given_entities(nlp, semeval_docs)
    nlp.initialize(lambda: examples)
    losses = train(nlp, examples, n_iter=40)
    return nlp, examples, losses


def test_overfits_semeval_sentences_with_direction(trained):
    nlp, examples, losses = trained
    assert losses[-1] < 0.1 * losses[0]
    scores = nlp.evaluate(examples)
    assert scores["rel_micro_f"] >= 0.9
    predicted = [eg.predicted for eg in examples]
    for doc, eg in zip(nlp.pipe(predicted), examples):
        gold = {(r.head, r.tail, r.label) for r in eg.reference._.relations}
        assert {(r.head, r.tail, r.label) for r in doc._.relations} <= gold | set()
        assert all(0.0 <= r.score <= 1.0 for r in doc._.relations)


def test_labels_come_from_the_data(trained, semeval_docs):
    nlp, _, _ = trained
    labels = {r.label for doc in semeval_docs for r in doc._.relations}
    assert set(nlp.get_pipe("pairatt_rel").labels) == labels
    assert not any("(" in label for label in labels), "directions are in head/tail order, not in labels"


def test_relations_survive_docbin_disk_and_pickle(trained, tmp_path):
    nlp, examples, _ = trained
    doc = nlp(examples[0].predicted.copy())
    doc._.relations = doc._.relations + [Relation((0, 1), (2, 3), "Made-Up", 0.25)]
    expected = doc._.relations
    assert len(expected) >= 1
    doc_bin = DocBin(store_user_data=True, docs=[doc])
    (from_bin,) = DocBin(store_user_data=True).from_bytes(doc_bin.to_bytes()).get_docs(nlp.vocab)
    doc.to_disk(tmp_path / "doc")
    from_disk = Doc(nlp.vocab).from_disk(tmp_path / "doc")
    from_pickle = pickle.loads(pickle.dumps(doc))
    for copy in (from_bin, from_disk, from_pickle):
        assert copy._.relations == expected
        assert [r.head_span(copy).text for r in copy._.relations] == [r.head_span(doc).text for r in expected]


def test_component_round_trips_through_disk(trained, tmp_path):
    nlp, examples, _ = trained
    set_setting(nlp, "pairatt_rel", "threshold", 0.3)
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert loaded.get_pipe("pairatt_rel").threshold == pytest.approx(0.3)
    docs = [eg.predicted for eg in examples[:6]]
    before = [d._.relations for d in nlp.pipe([d.copy() for d in docs])]
    after = [d._.relations for d in loaded.pipe([d.copy() for d in docs])]
    assert [[(r.head, r.tail, r.label) for r in rels] for rels in before] == [
        [(r.head, r.tail, r.label) for r in rels] for rels in after
    ]
    for rels_before, rels_after in zip(before, after):
        np.testing.assert_allclose([r.score for r in rels_before], [r.score for r in rels_after], rtol=1e-4)


def test_relations_outside_the_doc_are_refused():
    register_relations_extension()
    doc = spacy.blank("en")("Paris is in France .")
    with pytest.raises(ValueError, match="does not fit the Doc of 5 tokens"):
        doc._.relations = [((3, 4), (4, 9), "located_in")]
    with pytest.raises(ValueError, match="cannot read"):
        doc._.relations = [("Paris", "France")]
    assert doc._.relations == []


def test_gold_relation_without_candidate_spans_is_a_clear_error(trained, semeval_docs):
    nlp, _, _ = trained
    related = next(doc for doc in semeval_docs if doc._.relations)
    raw = Example(nlp.make_doc(related.text), related)  # what spacy.Corpus.v1 gives: no ents
    with pytest.raises(ValueError, match="GoldSpansCorpus"):
        nlp.update([raw])


def test_docs_with_fewer_than_two_entities_get_no_relations(trained):
    nlp, _, _ = trained
    docs = [nlp.make_doc("No entities here ."), nlp.make_doc("Only one entity .")]
    docs[1].ents = [Span(docs[1], 1, 2, "ENTITY")]
    docs[1]._.relations = [((0, 1), (2, 3), "stale")]
    for doc in nlp.pipe(docs + [nlp.make_doc("")]):
        assert doc._.relations == []


def test_multi_label_entities_with_several_mentions(tiny_bert_dir):
    """Document-level data: mentions grouped by span id, several relations per pair, a threshold."""
    fix_random_seed(0)
    nlp = relation_pipeline(tiny_bert_dir, {"spans_key": "entities", "multi_label": True, "negative_ratio": 1.0})
    reference = nlp.make_doc("Marie Curie was born in Warsaw . Curie later lived in Paris , far from Warsaw .")
    mentions = [(0, 2, "E0"), (7, 8, "E0"), (5, 6, "E1"), (15, 16, "E1"), (11, 12, "E2")]
    reference.spans["entities"] = [Span(reference, s, e, "ENT", span_id=i) for s, e, i in mentions]
    assert [[m.text for m in e] for e in entity_mentions(reference.spans["entities"])] == [
        ["Marie Curie", "Curie"],
        ["Warsaw", "Warsaw"],
        ["Paris"],
    ]
    gold = [((0, 2), (5, 6), "born_in"), ((0, 2), (5, 6), "lived_in"), ((0, 2), (11, 12), "lived_in")]
    reference._.relations = gold
    examples = given_entities(nlp, [reference], "entities")
    nlp.initialize(lambda: examples)
    losses = train(nlp, examples, n_iter=60, learn_rate=3e-3)
    assert losses[-1] < 0.1 * losses[0]
    (doc,) = nlp.pipe([examples[0].predicted])
    assert {(r.head, r.tail, r.label) for r in doc._.relations} == {(h, t, label) for h, t, label in gold}


def test_semeval_evaluation_and_table_from_a_saved_pipeline(trained, semeval_docs, tmp_path):
    """`semeval-evaluate` reads gold entities from the .spacy file and scores with the official scorer."""
    from spacy_pairatt.corpora.semeval import score_semeval
    from spacy_pairatt.evaluation.relation_eval import evaluate_semeval
    from spacy_pairatt.reporting.tables import relations_table

    nlp, examples, _ = trained
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=semeval_docs, store_user_data=True).to_disk(tmp_path / "data.spacy")
    result = evaluate_semeval(str(tmp_path / "model"), str(tmp_path / "data.spacy"))
    assert (result["task"], result["features"], result["n_docs"]) == ("semeval", "emb+att", len(semeval_docs))
    parsed = nlp.pipe(with_candidate_spans(doc, "ents") for doc in semeval_docs)
    predicted = [Example(doc, gold) for doc, gold in zip(parsed, semeval_docs)]
    assert result["scores"] == pytest.approx(score_semeval(predicted, 0.0))
    assert result["model_config"]["seed"] == nlp.config.interpolate()["training"]["seed"]
    assert len(result["model_config"]["config_sha256"]) == 64
    assert result["provenance"]["versions"]["spacy-transformers"] and result["provenance"]["wall_seconds"] >= 0
    table = relations_table([("tiny", result)])
    macro_f1 = 100 * result["scores"]["rel_semeval_macro_f1"]
    assert f"| tiny | emb+att | {tmp_path / 'data.spacy'} | {macro_f1:.1f} |" in table


def test_evaluation_drops_the_attention_maps_and_keeps_the_relations(trained, semeval_docs):
    """The Docs an evaluation keeps for scoring hold no attention maps, and the same relations."""
    from spacy_pairatt.evaluation.parser_eval import predict_examples

    nlp, _, _ = trained
    docs = semeval_docs[:4]
    piped = list(nlp.pipe(with_candidate_spans(doc, "ents") for doc in docs))
    assert all("attentions" in doc._.trf_data.model_output for doc in piped)
    examples = given_entities(nlp, docs)
    predict_examples(nlp, examples, batch_size=2)
    for example, doc in zip(examples, piped):
        output = example.predicted._.trf_data.model_output
        assert "attentions" not in output and "last_hidden_state" in output
        assert [(r.head, r.tail, r.label) for r in example.predicted._.relations] == [
            (r.head, r.tail, r.label) for r in doc._.relations
        ]


LABELS = ("born_in", "located_in")


@pytest.fixture(scope="module")
def saved_pipeline(tiny_bert_dir, tmp_path_factory):
    """An initialized (untrained) pipeline saved with the default settings: doc.ents, 0.5, one label per pair."""
    fix_random_seed(0)
    nlp = relation_pipeline(tiny_bert_dir)
    doc = nlp.make_doc("Marie Curie was born in Warsaw , Poland .")
    doc.ents = [Span(doc, 0, 2, "PER"), Span(doc, 5, 6, "LOC"), Span(doc, 7, 8, "LOC")]
    doc._.relations = [((0, 2), (5, 6), "born_in"), ((5, 6), (7, 8), "located_in")]
    nlp.initialize(lambda: given_entities(nlp, [doc]))
    path = tmp_path_factory.mktemp("relations") / "nlp"
    nlp.to_disk(path)
    return path


def every_relation(pairs):
    return {(head, tail, label) for head, tail in pairs for label in LABELS}


def candidates_doc(nlp, spans):
    doc = nlp.make_doc("Paris is in France , Europe .")
    doc.ents = [Span(doc, 0, 1, "LOC")]  # not the candidates once spans_key = "cands"
    doc.spans["cands"] = [Span(doc, start, end, "LOC", span_id=span_id) for start, end, span_id in spans]
    return doc


def test_load_time_config_wins_over_the_saved_settings(saved_pipeline):
    """spacy.load(path, config=...) runs with the settings nlp.config reports; labels stay the saved ones."""
    settings = {"spans_key": "cands", "multi_label": True, "threshold": 0.0}
    nlp = spacy.load(saved_pipeline, config={"components": {"pairatt_rel": settings}})
    component = nlp.get_pipe("pairatt_rel")
    assert {key: nlp.config["components"]["pairatt_rel"][key] for key in settings} == settings
    assert {key: component.cfg[key] for key in settings} == settings
    assert component.labels == LABELS
    doc = nlp(candidates_doc(nlp, [(0, 1, ""), (3, 4, "")]))
    # multi-label at threshold 0: every relation type, both directions, between the "cands" spans
    assert {(r.head, r.tail, r.label) for r in doc._.relations} == every_relation([((0, 1), (3, 4)), ((3, 4), (0, 1))])

    settings = {"spans_key": "cands", "multi_label": True, "threshold": 0.9}
    nlp = spacy.load(saved_pipeline, config={"components": {"pairatt_rel": settings}})
    assert {key: nlp.get_pipe("pairatt_rel").cfg[key] for key in settings} == settings
    assert nlp.get_pipe("pairatt_rel").threshold == 0.9


def test_config_wins_over_the_saved_settings_from_bytes(saved_pipeline):
    saved = spacy.load(saved_pipeline)
    config = saved.config.copy()
    config["components"]["pairatt_rel"]["threshold"] = 0.0
    config["components"]["pairatt_rel"]["multi_label"] = True
    nlp = spacy.util.load_model_from_config(config).from_bytes(saved.to_bytes())
    assert (nlp.get_pipe("pairatt_rel").threshold, nlp.get_pipe("pairatt_rel").cfg["multi_label"]) == (0.0, True)
    doc = nlp.make_doc("Paris is in France .")
    doc.ents = [Span(doc, 0, 1, "LOC"), Span(doc, 3, 4, "LOC")]
    assert len(nlp(doc)._.relations) == 4


def test_a_tuned_threshold_is_in_the_saved_config(saved_pipeline, tmp_path):
    nlp = spacy.load(saved_pipeline)
    component = nlp.get_pipe("pairatt_rel")
    set_setting(nlp, "pairatt_rel", "threshold", 0.25)
    assert nlp.config["components"]["pairatt_rel"]["threshold"] == 0.25
    nlp.to_disk(tmp_path / "tuned")
    loaded = spacy.load(tmp_path / "tuned")
    assert loaded.get_pipe("pairatt_rel").threshold == loaded.config["components"]["pairatt_rel"]["threshold"] == 0.25
    with pytest.raises(ValueError, match=r"pairatt_rel: threshold must be a number in \[0, 1\], got -0.1"):
        set_setting(nlp, "pairatt_rel", "threshold", -0.1)
    assert component.threshold == 0.25


def test_identical_candidate_spans_are_one_entity(saved_pipeline):
    """A span listed twice (or under two ids) gets no relation to itself."""
    settings = {"spans_key": "cands", "multi_label": True, "threshold": 0.0}
    nlp = spacy.load(saved_pipeline, config={"components": {"pairatt_rel": settings}})
    doc = nlp(candidates_doc(nlp, [(0, 1, ""), (0, 1, ""), (3, 4, ""), (3, 4, "E1"), (5, 6, "E1")]))
    assert nlp.get_pipe("pairatt_rel").doc_entities(doc) == [[(0, 1)], [(3, 4), (5, 6)]]
    assert {(r.head, r.tail, r.label) for r in doc._.relations} == every_relation([((0, 1), (3, 4)), ((3, 4), (0, 1))])


def test_dev_corpus_is_checked_like_the_training_corpus(tiny_bert_dir, tmp_path):
    """`spacy train` initializes with the config's dev corpus at hand: an empty or malformed one stops it there."""
    from spacy.training.initialize import init_nlp

    nlp = spacy.blank("en")
    register_relations_extension()
    doc = nlp.make_doc("Marie Curie was born in Warsaw , Poland .")
    doc.ents = [Span(doc, 0, 2, "PER"), Span(doc, 5, 6, "LOC"), Span(doc, 7, 8, "LOC")]
    doc._.relations = [((0, 2), (5, 6), "born_in"), ((5, 6), (7, 8), "located_in")]
    without_ents = nlp.make_doc("Paris is in France .")
    without_ents._.relations = [((0, 1), (3, 4), "located_in")]
    corpora = {
        "train": DocBin(docs=[doc], store_user_data=True),
        "empty": DocBin(store_user_data=True),
        "no_user_data": DocBin(docs=[doc]),
        "no_candidates": DocBin(docs=[doc, without_ents], store_user_data=True),
        "good": DocBin(docs=[doc], store_user_data=True),
    }
    for name, doc_bin in corpora.items():
        doc_bin.to_disk(tmp_path / f"{name}.spacy")

    def init(dev: str):
        overrides = {
            "paths.train": str(tmp_path / "train.spacy"),
            "paths.dev": str(tmp_path / f"{dev}.spacy"),
            "components.transformer.model.name": tiny_bert_dir,
        }
        config = spacy.util.load_config(REPO / "configs" / "rel_semeval_minilm.cfg", overrides=overrides)
        return init_nlp(config)

    dev = rf"dev corpus \[corpora.dev\] \({tmp_path / 'DEV.spacy'}\)"
    with pytest.raises(ValueError, match=f"pairatt_rel: the {dev.replace('DEV', 'empty')} has no examples"):
        init("empty")
    message = f"pairatt_rel: no example of the {dev.replace('DEV', 'no_user_data')} has gold relations"
    with pytest.raises(ValueError, match=message):
        init("no_user_data")
    message = rf"the relation 'located_in' of example 1 of the {dev.replace('DEV', 'no_candidates')} .*GoldSpansCorpus"
    with pytest.raises(ValueError, match=message):
        init("no_candidates")
    assert init("good").get_pipe("pairatt_rel").labels == LABELS


def test_distinct_entities_merges_spans_with_the_same_offsets():
    from spacy_pairatt.integration.doc_relations import distinct_entities

    doc = spacy.blank("en")("a b c d e f")
    spans = [Span(doc, 4, 5, "X", span_id="B"), Span(doc, 0, 1, "X"), Span(doc, 0, 1, "X", span_id="A")]
    spans += [Span(doc, 2, 3, "X", span_id="A"), Span(doc, 4, 5, "X", span_id="A"), Span(doc, 0, 1, "Y")]
    entities = distinct_entities(spans)
    assert [[(s.start, s.end, s.id_) for s in mentions] for mentions in entities] == [
        [(0, 1, "A"), (2, 3, "A")],  # the copy with an id stands for the span
        [(4, 5, "B")],  # the first with an id keeps the span: A does not get it too
    ]
    assert [len(mentions) for mentions in entity_mentions(spans)] == [1, 3, 1, 1]  # without merging
