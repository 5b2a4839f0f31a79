"""Re-DocRED reader on the shipped files; DocRED metrics on hand-built cases; relation rendering."""

import json
import random

import numpy as np
import pytest
from spacy.tokens import Doc, DocBin, Span
from spacy.vocab import Vocab

from spacy_pairatt.corpora.docred import (
    DOCRED_FILES,
    SPANS_KEY,
    convert_docred,
    docred_doc,
    docred_facts,
    fetch_docred,
    name_triples,
    seen_in_training,
)
from spacy_pairatt.corpora.relation_metrics import docred_scores, tune_threshold
from spacy_pairatt.integration.doc_relations import (
    Relation,
    entity_mentions,
    register_relations_extension,
    render_relations,
)
from tests.conftest import DATA

REDOCRED_DIR = DATA / "docred" / "re-docred"


def no_space(text: str) -> str:
    return "".join(text.split())


# --- metrics -------------------------------------------------------------------------------------


def test_a_perfect_ranking_scores_one_except_the_official_auc_start():
    gold = [f"fact{i}" for i in range(10)]
    predicted = {fact: 1.0 - i / 20 for i, fact in enumerate(gold)}
    predicted["wrong"] = 0.1
    scores = docred_scores(gold, predicted, seen_in_train=(), theta=0.5)
    assert scores["precision"] == scores["recall"] == scores["f1"] == scores["ign_f1"] == 1.0
    # points (k/10, 1) for k = 1..10, then (1, 10/11): the area starts at recall 1/10, not 0
    assert scores["auc"] == pytest.approx(1 - 1 / 10)
    assert tune_threshold(gold, predicted) == min(predicted[fact] for fact in gold)


def test_hand_built_precision_recall_ign_and_auc():
    gold = {"a", "b", "c"}
    predicted = {"a": 0.9, "x": 0.8, "b": 0.7, "y": 0.2}
    scores = docred_scores(gold, predicted, seen_in_train={"a"}, theta=0.5)
    assert (scores["precision"], scores["recall"]) == pytest.approx((2 / 3, 2 / 3))
    assert scores["f1"] == pytest.approx(2 / 3)
    # Ign: the seen correct "a" leaves both precision terms, recall stays 2/3 (official definition)
    assert scores["ign_precision"] == pytest.approx((2 - 1) / (3 - 1))
    assert scores["ign_f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    # curve (recall, precision): (1/3, 1), (1/3, 1/2), (2/3, 2/3), (2/3, 1/2)
    assert scores["auc"] == pytest.approx((1 / 3) * (1 / 2 + 2 / 3) / 2)
    # ign precision: a seen -> 0 (no unseen correct yet), x -> 0/1, b -> 1/2, y -> 1/3
    assert scores["ign_auc"] == pytest.approx((1 / 3) * (0 + 1 / 2) / 2)
    assert scores["n_gold"] == 3 and scores["n_predicted"] == 3
    nothing = docred_scores(gold, predicted, seen_in_train=(), theta=0.95)
    assert nothing["precision"] == nothing["f1"] == nothing["n_predicted"] == 0


def test_every_correct_prediction_seen_gives_ign_zero():
    scores = docred_scores({"a", "b"}, {"a": 0.9, "b": 0.8}, seen_in_train={"a", "b"}, theta=0.5)
    assert scores["f1"] == 1.0 and scores["ign_precision"] == scores["ign_f1"] == 0.0


def official_loop(gold, predicted, seen, theta):
    """The official evaluation written as its per-prediction loop, to check the vectorised one."""
    ranked = sorted(predicted.items(), key=lambda item: item[1], reverse=True)
    correct = correct_seen = 0
    recall, precision, ign_precision = [], [], []
    kept = []
    for i, (fact, score) in enumerate(ranked):
        correct += fact in gold
        correct_seen += fact in gold and fact in seen
        precision.append(correct / (i + 1))
        recall.append(correct / len(gold))
        ign_precision.append(0 if correct_seen == correct else (correct - correct_seen) / (i + 1 - correct_seen))
        if score >= theta:
            kept.append(i)
    at = kept[-1]

    def area(y):
        return sum((recall[i] - recall[i - 1]) * (y[i] + y[i - 1]) / 2 for i in range(1, len(ranked)))

    return precision[at], recall[at], ign_precision[at], area(precision), area(ign_precision)


@pytest.mark.parametrize("seed", range(5))
def test_vectorised_metrics_equal_the_loop(seed):
    generator = random.Random(seed)
    candidates = [f"f{i}" for i in range(300)]
    gold = set(generator.sample(candidates, 60)) | {"never-predicted"}
    seen = set(generator.sample(sorted(gold), 20))
    predicted = {fact: round(generator.random(), 2) for fact in candidates}  # rounding makes ties
    theta = 0.5
    scores = docred_scores(gold, predicted, seen, theta)
    p, r, ign_p, auc, ign_auc = official_loop(gold, predicted, seen, theta)
    assert (scores["precision"], scores["recall"], scores["ign_precision"]) == pytest.approx((p, r, ign_p))
    assert (scores["auc"], scores["ign_auc"]) == pytest.approx((auc, ign_auc))


@pytest.mark.parametrize("seed", range(5))
def test_tune_threshold_finds_the_best_cut(seed):
    generator = np.random.default_rng(seed)
    facts = [f"f{i}" for i in range(200)]
    gold = {fact for fact in facts if generator.random() < 0.3}
    predicted = {fact: float(np.round(generator.random() * 0.5 + 0.4 * (fact in gold), 2)) for fact in facts}
    best = max(docred_scores(gold, predicted, (), theta)["f1"] for theta in set(predicted.values()))
    theta = tune_threshold(gold, predicted)
    assert theta in predicted.values()
    assert docred_scores(gold, predicted, (), theta)["f1"] == pytest.approx(best)


def test_a_tie_is_never_split():
    # cutting after "a" alone would give F1 2/3, but "a" ties with "x": the cut keeps both or neither
    gold = {"a", "b"}
    predicted = {"a": 0.9, "x": 0.9, "b": 0.1, "y": 0.1, "z": 0.1, "w": 0.1, "v": 0.1}
    theta = tune_threshold(gold, predicted)
    assert theta == 0.9
    assert docred_scores(gold, predicted, (), theta)["n_predicted"] == 2
    with pytest.raises(ValueError, match="no predicted facts"):
        tune_threshold(gold, {})


# --- reader --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def records():
    if not (REDOCRED_DIR / "dev_revised.json").exists():
        pytest.skip(f"Re-DocRED not found at {REDOCRED_DIR}")
    return {
        name: json.loads((REDOCRED_DIR / f"{name}_revised.json").read_text(encoding="utf8")) for name in ("dev", "test")
    }


@pytest.fixture(scope="module")
def converted(records, tmp_path_factory):
    """The three splits written as .spacy files and read back."""
    register_relations_extension()
    paths = convert_docred(REDOCRED_DIR, tmp_path_factory.mktemp("docred"))
    vocab = Vocab()
    docs = {name: list(DocBin().from_disk(path).get_docs(vocab)) for name, path in paths.items()}
    return {"dev": docs["train"] + docs["tune"], "test": docs["test"], "splits": docs}


def first_mention(record, entity):
    starts = np.cumsum([0] + [len(sent) for sent in record["sents"]])
    return min(
        (starts[m["sent_id"]] + m["pos"][0], starts[m["sent_id"]] + m["pos"][1]) for m in record["vertexSet"][entity]
    )


def test_fetch_links_the_local_copy(records, tmp_path):
    fetch_docred(tmp_path, REDOCRED_DIR)
    assert all((tmp_path / name).resolve() == (REDOCRED_DIR / name).resolve() for name in DOCRED_FILES)


def test_splits_are_400_100_and_500_in_file_order(records, converted):
    assert [len(converted["splits"][name]) for name in ("train", "tune", "test")] == [400, 100, 500]
    for name in ("dev", "test"):
        assert [doc.user_data["docred_title"] for doc in converted[name]] == [r["title"] for r in records[name]]


def test_tokens_sentences_and_relations_follow_the_json(records, converted):
    for name in ("dev", "test"):
        assert sum(len(doc._.relations) for doc in converted[name]) == sum(len(r["labels"]) for r in records[name])
        for doc, record in zip(converted[name], records[name]):
            assert [token.text for token in doc] == [word for sent in record["sents"] for word in sent]
            assert [len(sent) for sent in doc.sents] == [len(sent) for sent in record["sents"]]
            expected = sorted(
                (
                    tuple(map(int, first_mention(record, label["h"]))),
                    tuple(map(int, first_mention(record, label["t"]))),
                    label["r"],
                )
                for label in record["labels"]
            )
            assert sorted((r.head, r.tail, r.label) for r in doc._.relations) == expected
            assert len(entity_mentions(doc.spans[SPANS_KEY])) == len(record["vertexSet"])


def test_mentions_are_spans_with_entity_ids_types_and_names(records, converted):
    mentions = mismatched_names = 0
    for name in ("dev", "test"):
        for doc, record in zip(converted[name], records[name]):
            spans = {(span.start, span.end, span.id_): span for span in doc.spans[SPANS_KEY]}
            starts = np.cumsum([0] + [len(sent) for sent in record["sents"]])
            for index, entity in enumerate(record["vertexSet"]):
                assert sorted(doc.user_data["docred_names"][f"E{index}"]) == sorted({m["name"] for m in entity})
                for mention in entity:
                    start = int(starts[mention["sent_id"]])
                    span = spans[(start + mention["pos"][0], start + mention["pos"][1], f"E{index}")]
                    tokens = record["sents"][mention["sent_id"]][mention["pos"][0] : mention["pos"][1]]
                    assert no_space(span.text) == no_space("".join(tokens))
                    assert span.label_ in {m["type"] for m in entity}
                    mentions += 1
                    if no_space(span.text) != no_space(mention["name"]):
                        # annotation noise: the name itself differs from its tokens ("7.\n100 years")
                        assert no_space(mention["name"]) != no_space("".join(tokens))
                        mismatched_names += 1
    assert mismatched_names < mentions / 1000


def test_facts_and_seen_in_training_on_the_real_split(records, converted):
    for name in ("dev", "test"):
        expected = {
            (
                position,
                tuple(map(int, first_mention(r, label["h"]))),
                tuple(map(int, first_mention(r, label["t"]))),
                label["r"],
            )
            for position, r in enumerate(records[name])
            for label in r["labels"]
        }
        assert len(docred_facts(converted[name])) == len(expected)
    train = name_triples(converted["splits"]["train"])
    seen = seen_in_training(converted["splits"]["tune"], train)
    assert 0 < len(seen) < len(docred_facts(converted["splits"]["tune"]))


def test_a_mention_outside_its_sentence_raises_naming_the_document():
    record = {
        "title": "Broken page",
        "sents": [["Ada", "Lovelace", "wrote", "."], ["She", "died", "."]],
        "vertexSet": [[{"name": "Ada Lovelace", "sent_id": 1, "pos": [2, 5], "type": "PER"}]],
        "labels": [],
    }
    register_relations_extension()
    with pytest.raises(ValueError, match="Broken page"):
        docred_doc(Vocab(), record)


def small_doc(vocab, title, names, relations):
    """A two-sentence document: entity 0 = "Ada Lovelace" (twice), entity 1 = "London"."""
    record = {
        "title": title,
        "sents": [["Ada", "Lovelace", "lived", "in", "London", "."], ["Lovelace", "wrote", "notes", "."]],
        "vertexSet": [
            [
                {"name": names[0], "sent_id": 0, "pos": [0, 2], "type": "PER"},
                {"name": "Lovelace", "sent_id": 1, "pos": [0, 1], "type": "PER"},
            ],
            [{"name": names[1], "sent_id": 0, "pos": [4, 5], "type": "LOC"}],
        ],
        "labels": [{"h": 0, "t": 1, "r": relation, "evidence": [0]} for relation in relations],
    }
    return docred_doc(vocab, record)


def test_seen_in_training_uses_any_mention_name_pair():
    register_relations_extension()
    vocab = Vocab()
    train = name_triples([small_doc(vocab, "train", ("Augusta Ada King", "London"), ["P551"])])
    assert train == {("Augusta Ada King", "London", "P551"), ("Lovelace", "London", "P551")}
    gold = [small_doc(vocab, "eval", ("Ada Lovelace", "London"), ["P551", "P20"])]
    assert gold[0].text == "Ada Lovelace lived in London. Lovelace wrote notes."
    seen = seen_in_training(gold, train)  # "Lovelace" (second mention) + London + P551 was in training
    assert {fact[3] for fact in seen} == {"P551"}
    assert {fact[3] for fact in docred_facts(gold)} == {"P551", "P20"}


def test_predicted_docs_match_gold_by_characters_not_tokens():
    register_relations_extension()
    vocab = Vocab()
    gold = small_doc(vocab, "eval", ("Ada Lovelace", "London"), ["P551"])
    predicted = Doc(vocab, words=["Ada Lovelace", "lived", "in", "London."], spaces=[True, True, True, False])
    predicted._.relations = [Relation((0, 1), (3, 4), "P551", 0.8)]
    assert set(docred_facts([gold])) != set(docred_facts([predicted]))  # "London." is not "London"
    predicted = Doc(
        vocab, words=["Ada Lovelace", "lived", "in", "London", "."], spaces=[True, True, True, False, False]
    )
    predicted._.relations = [Relation((0, 1), (3, 4), "P551", 0.8)]
    assert set(docred_facts([gold])) == set(docred_facts([predicted]))


# --- rendering -----------------------------------------------------------------------------------


def test_render_relations_draws_labelled_arcs():
    register_relations_extension()
    doc = small_doc(Vocab(), "eval", ("Ada Lovelace", "London"), ["P551", "P20"])
    html = render_relations(doc, spans_key=SPANS_KEY)
    assert html.startswith("<svg") and "P551" in html and "P20" in html and "PER" in html
    doc.ents = [Span(doc, 0, 2, "PER"), Span(doc, 4, 5, "LOC")]
    doc._.relations = [Relation((4, 5), (0, 2), "capital-of-nothing")]
    page = render_relations(doc, page=True)
    assert "<html" in page and "capital-of-nothing" in page
    doc._.relations = [Relation((4, 5), (4, 5), "self")]
    with pytest.raises(ValueError, match="self"):
        render_relations(doc)
