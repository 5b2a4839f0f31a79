"""SemEval-2010 Task 8: the converter on the shipped files, the scorer against the official example outputs."""

import os
import random
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_pairatt.corpora.relation_metrics import SEMEVAL_LABELS, semeval_official_scores
from spacy_pairatt.corpora.semeval import (
    SEMEVAL_FILES,
    TEST_FILE,
    TRAIN_FILE,
    convert_semeval,
    fetch_semeval,
    make_example_doc,
    semeval_label,
    stratified_dev_indices,
)
from spacy_pairatt.integration.doc_relations import Relation, register_relations_extension
from tests.conftest import DATA

SEMEVAL_DIR = DATA / "semeval2010_task8"
SCORER_DIR = SEMEVAL_DIR / "SemEval2010_task8_all_data" / "SemEval2010_task8_scorer-v1.2"
PERL_SCORER = Path(os.environ.get("PAIRATT_SEMEVAL_SCORER", SCORER_DIR / "semeval2010_task8_scorer-v1.2.pl"))


def raw_examples(path: Path):
    """(id, tagged sentence, label), read without the converter: an 'id<TAB>"sentence"' line, then the label."""
    lines = path.read_text(encoding="utf8").splitlines()
    examples = []
    for number, line in enumerate(lines):
        match = re.match(r'^(\d+)\t"(.*)"$', line)
        if match:
            examples.append((match[1], match[2], lines[number + 1].strip()))
    return examples


@pytest.fixture(scope="module")
def raw():
    if not (SEMEVAL_DIR / TRAIN_FILE).exists():
        pytest.skip(f"SemEval-2010 Task 8 not found at {SEMEVAL_DIR}")
    return {"train": raw_examples(SEMEVAL_DIR / TRAIN_FILE), "test": raw_examples(SEMEVAL_DIR / TEST_FILE)}


@pytest.fixture(scope="module")
def converted(raw, tmp_path_factory):
    """The three splits written as .spacy files and read back."""
    register_relations_extension()
    paths = convert_semeval(SEMEVAL_DIR, tmp_path_factory.mktemp("semeval"))
    vocab = spacy.blank("en").vocab
    return {name: list(DocBin().from_disk(path).get_docs(vocab)) for name, path in paths.items()}


def test_raw_files_hold_8000_and_2717_examples(raw):
    assert len(raw["train"]) == 8000 and len(raw["test"]) == 2717
    assert Counter(label for _, _, label in raw["train"])["Other"] == 1410
    assert Counter(label for _, _, label in raw["test"])["Other"] == 454
    assert {label for split in raw.values() for _, _, label in split} == set(SEMEVAL_LABELS)


def test_fetch_links_the_local_copy_and_refuses_a_changed_one(raw, tmp_path):
    fetch_semeval(tmp_path / "linked", SEMEVAL_DIR)
    for name in SEMEVAL_FILES:
        assert (tmp_path / "linked" / name).resolve() == (SEMEVAL_DIR / name).resolve()
    for name in SEMEVAL_FILES:
        (tmp_path / "changed" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "changed" / name).write_text('1\t"The <e1>cat</e1> sat on the <e2>mat</e2>."\nOther\n')
    with pytest.raises(ValueError, match="SHA-256"):
        fetch_semeval(tmp_path / "out", tmp_path / "changed")


def training_docs_in_file_order(converted):
    return sorted(converted["train"] + converted["dev"], key=lambda doc: doc.user_data["semeval_id"])


def test_splits_keep_every_example_in_file_order(raw, converted):
    assert [len(converted[name]) for name in ("train", "dev", "test")] == [7200, 800, 2717]
    for name in ("train", "dev"):
        ids = [doc.user_data["semeval_id"] for doc in converted[name]]
        assert ids == sorted(ids)
    for docs, examples in ((training_docs_in_file_order(converted), raw["train"]), (converted["test"], raw["test"])):
        assert [doc.user_data["semeval_id"] for doc in docs] == [int(sentence_id) for sentence_id, _, _ in examples]


def test_dev_split_is_stratified_by_label(raw, converted):
    whole = Counter(label for _, _, label in raw["train"])
    dev = Counter(semeval_label(doc) for doc in converted["dev"])
    assert all(abs(dev[label] - count / 10) <= 1 for label, count in whole.items()), (dev, whole)


def test_stratified_dev_indices_depend_on_the_seed_only():
    labels = [random.Random(3).choice("abc") for _ in range(1000)]
    dev = stratified_dev_indices(labels)
    assert dev == stratified_dev_indices(labels) != stratified_dev_indices(labels, seed=1)
    assert len(dev) == 100 and dev == sorted(dev)
    dev_counts = Counter(labels[index] for index in dev)
    assert all(abs(dev_counts[label] - count / 10) <= 1 for label, count in Counter(labels).items())


def test_directional_labels_come_back_from_the_relations(raw, converted):
    for docs, examples in ((training_docs_in_file_order(converted), raw["train"]), (converted["test"], raw["test"])):
        labels = [semeval_label(doc) for doc in docs]
        assert labels == [label for _, _, label in examples]
        assert Counter(labels) == Counter(label for _, _, label in examples)


def test_e1_e2_spans_hold_the_tagged_text(raw, converted):
    glued = []
    for docs, examples in ((training_docs_in_file_order(converted), raw["train"]), (converted["test"], raw["test"])):
        for doc, (sentence_id, tagged, _) in zip(docs, examples):
            assert [ent.label_ for ent in doc.ents] == ["ENTITY", "ENTITY"]
            assert doc.text == re.sub(r"</?e[12]>", "", tagged)
            for ent, tag in zip(doc.ents, ("e1", "e2")):
                expected = "".join(re.search(f"<{tag}>(.*)</{tag}>", tagged)[1].split())
                actual = "".join(ent.text.split())
                if re.search(rf"\w<{tag}>|</{tag}>\w", tagged):  # the tag sits inside a word: "doves<e2>moles"
                    glued.append(sentence_id)
                    assert expected in actual and len(actual) > len(expected), sentence_id
                else:
                    assert actual == expected, sentence_id
    assert 0 < len(glued) < 20  # the few entities tagged inside a word grow to the whole token


def test_a_bad_example_raises_naming_its_id(tmp_path):
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="sentence 17"):
        make_example_doc(nlp, "17", "The <e1>cat</e1> sat on the <e2>mat.", "Other")
    with pytest.raises(ValueError, match="sentence 18"):
        make_example_doc(nlp, "18", "The <e1>cat</e1> sat on the <e2>mat</e2>.", "Sitting(e1,e3)")
    with pytest.raises(ValueError, match="sentence 19"):
        make_example_doc(nlp, "19", "The <e1></e1> sat on the <e2>mat</e2>.", "Other")


def test_semeval_label_takes_the_best_relation_in_either_direction():
    register_relations_extension()
    doc = make_example_doc(spacy.blank("en"), "1", "The <e1>cat</e1> sat on the <e2>mat</e2>.", "Other")
    e1, e2 = ((ent.start, ent.end) for ent in doc.ents)
    assert semeval_label(doc) == "Other"
    doc._.relations = [Relation(e1, e2, "Cause-Effect", 0.4), Relation(e2, e1, "Component-Whole", 0.7)]
    assert semeval_label(doc) == "Component-Whole(e2,e1)"
    assert semeval_label(doc, threshold=0.3) == "Component-Whole(e2,e1)"
    assert semeval_label(doc, threshold=0.8) == "Other"
    doc._.relations = [Relation(e1, e2, "Cause-Effect", 0.9)]
    assert semeval_label(doc) == "Cause-Effect(e1,e2)"


def read_answers(path: Path):
    return dict(line.split("\t") for line in path.read_text(encoding="utf8").splitlines() if line.strip())


PERCENTAGES = r"P = .*?=\s*([\d.]+)%\s+R = .*?=\s*([\d.]+)%\s+F1 =\s*([\d.]+)%"
SECTIONS = {"USING DIRECTIONALITY": "19_way", "IGNORING": "ignoring_direction", "TAKING": "with_direction"}


def official_results(text: str):
    """Per evaluation of a result_scoresN.txt: accuracy, micro and macro P/R/F1, per relation P/R/F1 (percent)."""
    results = {}
    for block in text.split("<<< ")[1:]:
        name = next((key for marker, key in SECTIONS.items() if marker in block.splitlines()[0]), None)
        if name is None:
            continue
        micro = re.search(r"Micro-averaged result.*?\n" + PERCENTAGES, block)
        macro = re.search(r"MACRO-averaged result.*?\nP =\s*([\d.]+)%\tR =\s*([\d.]+)%\tF1 =\s*([\d.]+)%", block)
        accuracy = re.search(r"Accuracy \(calculated for the above confusion matrix\) = .*?=\s*([\d.]+)%", block)
        per_relation = {
            match[1]: tuple(float(value) for value in match.groups()[1:])
            for match in re.finditer(r"^\s*(\S+) :\s+" + PERCENTAGES + "$", block, re.M)
        }
        per_relation.pop("_Other", None)  # in example 5 the key has no Other
        results[name] = {
            "micro": tuple(map(float, micro.groups())),
            "macro": tuple(map(float, macro.groups())),
            "accuracy": float(accuracy[1]),
            "per_relation": per_relation,
        }
    results["official"] = float(re.search(r"macro-averaged F1 = ([\d.]+)%", text)[1])
    return results


def example_numbers():
    """The N with proposed_answerN.txt, answer_keyN.txt and the official result_scoresN.txt."""
    numbers = (int(path.stem[len("result_scores") :]) for path in SCORER_DIR.glob("result_scores*.txt"))
    return sorted(
        n for n in numbers if all((SCORER_DIR / f"{k}{n}.txt").exists() for k in ("proposed_answer", "answer_key"))
    )


def close(ours: float, official_percent: float) -> bool:
    return abs(100 * ours - official_percent) <= 0.01


@pytest.mark.parametrize("number", example_numbers() or [pytest.param(0, marks=pytest.mark.skip("no scorer data"))])
def test_scorer_matches_the_official_example_outputs(number):
    official = official_results((SCORER_DIR / f"result_scores{number}.txt").read_text(encoding="utf8"))
    ours = semeval_official_scores(
        read_answers(SCORER_DIR / f"answer_key{number}.txt"), read_answers(SCORER_DIR / f"proposed_answer{number}.txt")
    )
    assert close(ours["macro_f1"], official["official"])
    for name in SECTIONS.values():
        mine, theirs = ours[name], official[name]
        assert close(mine["accuracy"], theirs["accuracy"])
        for ours_value, official_value in zip(
            (mine["micro_p"], mine["micro_r"], mine["micro_f1"], mine["macro_p"], mine["macro_r"], mine["macro_f1"]),
            theirs["micro"] + theirs["macro"],
        ):
            assert close(ours_value, official_value), (name, ours_value, official_value)
        assert set(mine["per_relation"]) == set(theirs["per_relation"])
        for relation, (p, r, f) in theirs["per_relation"].items():
            values = mine["per_relation"][relation]
            assert close(values["p"], p) and close(values["r"], r) and close(values["f"], f), (name, relation)


def test_sequences_and_mappings_score_alike():
    gold = ["Cause-Effect(e1,e2)", "Other", "Cause-Effect(e2,e1)", "Message-Topic(e1,e2)"]
    predicted = ["Cause-Effect(e2,e1)", "Other", "Cause-Effect(e2,e1)", "Other"]
    assert semeval_official_scores(gold, predicted) == semeval_official_scores(
        dict(enumerate(gold)), dict(enumerate(predicted))
    )
    # Cause-Effect: 1 right of 2 predicted (one in the wrong direction), 2 gold; Message-Topic: 0 of 0, 1 gold
    scores = semeval_official_scores(gold, predicted)
    assert scores["with_direction"]["per_relation"]["Cause-Effect"] == {"p": 0.5, "r": 0.5, "f": 0.5}
    assert scores["macro_f1"] == pytest.approx((0.5 + 0.0) / 2)
    assert scores["ignoring_direction"]["per_relation"]["Cause-Effect"]["f"] == 1.0


def test_bad_labels_and_ids_are_refused():
    with pytest.raises(ValueError, match="sentence 1"):
        semeval_official_scores(["Other", "Other"], ["Other", "Cause-Effect"])
    with pytest.raises(ValueError, match="without a gold label"):
        semeval_official_scores({1: "Other"}, {2: "Other"})


@pytest.mark.skipif(
    shutil.which("perl") is None or not PERL_SCORER.exists(),
    reason="needs perl and the official semeval2010_task8_scorer-v1.2.pl (not shipped with the data here; "
    "set PAIRATT_SEMEVAL_SCORER to its path)",
)
def test_scorer_matches_the_perl_script_on_random_predictions(tmp_path):
    gold = read_answers(SCORER_DIR / "answer_key2.txt")
    generator = random.Random(0)
    predicted = {key: generator.choice(SEMEVAL_LABELS) for key in gold if generator.random() > 0.05}
    for key in list(predicted)[::3]:
        predicted[key] = gold[key]
    answers = tmp_path / "proposed.txt"
    answers.write_text("".join(f"{key}\t{label}\n" for key, label in predicted.items()), encoding="utf8")
    output = subprocess.run(
        ["perl", str(PERL_SCORER), str(answers), str(SCORER_DIR / "answer_key2.txt")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert close(semeval_official_scores(gold, predicted)["macro_f1"], official_results(output)["official"])
