"""SemEval-2010 Task 8 (Hendrickx et al. 2010, CC BY 3.0) as spaCy Docs with `doc._.relations`.

Each example becomes one Doc: the sentence without its <e1>/<e2> tags, tokenised by spaCy's
English tokenizer; e1 and e2 are `doc.ents` (label "ENTITY", e1 always first); a directional label
"R(e1,e2)" is Relation(head=e1, tail=e2, label=R), "R(e2,e1)" is Relation(head=e2, tail=e1,
label=R), and "Other" is no relation. The sentence id is `doc.user_data["semeval_id"]`.

Source: the organisers' full release SemEval2010_task8_all_data (July 2010; task description
http://docs.google.com/View?id=dfvxd49s_36c28v9pmw as its scorer README gives it, paper
https://aclanthology.org/S10-1006/). Its original download links are gone, so `fetch_semeval`
links a local copy or downloads the two files from a GitHub mirror pinned to a commit, whose
content read with LF line ends equals the official CRLF files (checked by SHA-256).
"""

import re
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import numpy
import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from ..integration.doc_relations import Relation
from ..integration.extensions import register_extensions
from .files import fetch_checked, write_docbins
from .relation_metrics import OTHER, semeval_official_scores

ENTITY_LABEL = "ENTITY"
DATA_DIR = "SemEval2010_task8_all_data"
TRAIN_FILE = f"{DATA_DIR}/SemEval2010_task8_training/TRAIN_FILE.TXT"
TEST_FILE = f"{DATA_DIR}/SemEval2010_task8_testing_keys/TEST_FILE_FULL.TXT"
MIRROR_URL = (
    "https://raw.githubusercontent.com/roomylee/rcnn-text-classification/"
    "e8c56295581a4150f77c6a589548d7bc66c52f99/{name}"
)
SEMEVAL_FILES = {
    TRAIN_FILE: (
        MIRROR_URL.format(name=TRAIN_FILE),
        "73cd76bf45c17257d9dba882655917109a863ccd42ad69ee6a34083a61202b51",
    ),
    TEST_FILE: (MIRROR_URL.format(name=TEST_FILE), "066b269d0bebbefaba2f347671b373d45fdecad9191513417572a07bc61b9566"),
}
DEV_EVERY = 10  # every 10th training example of each label, in a seeded shuffle: 800 of 8,000
DEV_SEED = 0
TAGS = ["<e1>", "</e1>", "<e2>", "</e2>"]
TAG = re.compile(r"</?e[12]>")
DIRECTED = re.compile(r"^(?P<relation>[A-Za-z-]+)\((?P<direction>e1,e2|e2,e1)\)$")
# Entity markers (Baldini Soares et al. 2019; the reference model): "$ e1 $" and "# e2 #" in
# the text, as tokens of their own outside the e1/e2 spans.
MARKERS = {"<e1>": "$ <e1>", "</e1>": "</e1> $", "<e2>": "# <e2>", "</e2>": "</e2> #"}


def fetch_semeval(dest: Path, local_dir: Optional[Path] = None) -> None:
    """TRAIN_FILE.TXT and TEST_FILE_FULL.TXT under dest/SemEval2010_task8_all_data/ (link or download)."""
    fetch_checked(dest, SEMEVAL_FILES, local_dir)


def read_examples(path: Path) -> Iterator[Tuple[str, str, str]]:
    """(id, tagged sentence, label) per example of TRAIN_FILE.TXT / TEST_FILE_FULL.TXT (CRLF or LF)."""
    lines = path.read_text(encoding="utf8").splitlines()
    starts = [number for number, line in enumerate(lines) if re.match(r"^\d+\t", line)]
    for number in starts:
        sentence_id, quoted = lines[number].split("\t", 1)
        label = lines[number + 1].strip() if number + 1 < len(lines) else ""
        if len(quoted) < 2 or quoted[0] != '"' or quoted[-1] != '"' or not label or "\t" in label:
            raise ValueError(
                f"{path}, line {number + 1}: sentence {sentence_id} is not '<id>\\t\"<sentence>\"' + label"
            )
        yield sentence_id, quoted[1:-1], label


def untag(sentence_id: str, tagged: str) -> Tuple[str, Tuple[int, int], Tuple[int, int]]:
    """The sentence without tags and the character offsets of e1 and e2 in it."""
    matches = list(TAG.finditer(tagged))
    if [match.group() for match in matches] != TAGS:
        found = [match.group() for match in matches]
        raise ValueError(f"SemEval sentence {sentence_id}: tags {found}, expected {TAGS} in this order")
    removed = 0
    positions = []
    for match in matches:
        positions.append(match.start() - removed)
        removed += len(match.group())
    text = TAG.sub("", tagged)
    e1, e2 = (positions[0], positions[1]), (positions[2], positions[3])
    for name, (start, end) in (("e1", e1), ("e2", e2)):
        if not text[start:end].strip():
            raise ValueError(f"SemEval sentence {sentence_id}: {name} is empty")
    return text, e1, e2


def label_to_relations(sentence_id: str, label: str, e1: Tuple[int, int], e2: Tuple[int, int]) -> List[Relation]:
    """'R(e1,e2)' -> [Relation(e1, e2, R)], 'R(e2,e1)' -> [Relation(e2, e1, R)], 'Other' -> []."""
    if label == OTHER:
        return []
    match = DIRECTED.match(label)
    if match is None:
        raise ValueError(f"SemEval sentence {sentence_id}: label {label!r} is neither 'Relation(eX,eY)' nor 'Other'")
    head, tail = (e1, e2) if match["direction"] == "e1,e2" else (e2, e1)
    return [Relation(head, tail, match["relation"])]


def make_example_doc(nlp: Language, sentence_id: str, tagged: str, label: str, markers: bool = False) -> Doc:
    """One example as a Doc; e1/e2 grow to whole tokens where a tag sits inside a word ("doves<e2>moles").

    markers: put "$" around e1 and "#" around e2 in the text.
    """
    if markers:
        tagged = TAG.sub(lambda match: MARKERS[match.group()], tagged)
    text, e1_chars, e2_chars = untag(sentence_id, tagged)
    doc = nlp.make_doc(text)
    spans = [doc.char_span(*chars, label=ENTITY_LABEL, alignment_mode="expand") for chars in (e1_chars, e2_chars)]
    if any(span is None or len(span) == 0 for span in spans):
        raise ValueError(f"SemEval sentence {sentence_id}: no token span for e1 or e2 in {text!r}")
    e1, e2 = spans
    if e1.end > e2.start:
        raise ValueError(f"SemEval sentence {sentence_id}: e1 {e1.text!r} and e2 {e2.text!r} share a token")
    doc.ents = [e1, e2]
    doc._.relations = label_to_relations(sentence_id, label, (e1.start, e1.end), (e2.start, e2.end))
    doc.user_data["semeval_id"] = int(sentence_id)
    return doc


def read_semeval(path: Path, nlp: Optional[Language] = None, markers: bool = False) -> Iterator[Doc]:
    """The Docs of one SemEval file, in file order."""
    register_extensions()
    nlp = nlp or spacy.blank("en")
    for sentence_id, tagged, label in read_examples(path):
        yield make_example_doc(nlp, sentence_id, tagged, label, markers)


def stratified_dev_indices(labels: List[str], every: int = DEV_EVERY, seed: int = DEV_SEED) -> List[int]:
    """Indices of a dev split of len(labels) // every examples whose label counts are each within
    one of 1/every of the whole: labels sorted, ties broken by a seeded shuffle, every every-th taken.

    A split by file position would not do: examples 7110-8000 of TRAIN_FILE.TXT come from
    SemEval-2007 Task 4 (training README), so the last 800 hold 5 Message-Topic and 251 Other.
    """
    shuffled_rank = numpy.random.default_rng(seed).permutation(len(labels))
    by_label = numpy.lexsort((shuffled_rank, numpy.asarray(labels)))
    return sorted(by_label[every - 1 :: every].tolist())


def semeval_splits(src_dir: Path, markers: bool = False) -> Dict[str, List[Doc]]:
    """train: 7,200 training examples, dev: the other 800, stratified by the 19-way label
    (`stratified_dev_indices`), test: all 2,717; each in file order. The release has no dev split."""
    nlp = spacy.blank("en")
    train = list(read_semeval(src_dir / TRAIN_FILE, nlp, markers))
    test = list(read_semeval(src_dir / TEST_FILE, nlp, markers))
    dev_indices = set(stratified_dev_indices([semeval_label(doc) for doc in train]))
    return {
        "train": [doc for index, doc in enumerate(train) if index not in dev_indices],
        "dev": [doc for index, doc in enumerate(train) if index in dev_indices],
        "test": test,
    }


def convert_semeval(src_dir: Path, out_dir: Path, markers: bool = False) -> Dict[str, Path]:
    """OUT_DIR/train.spacy, dev.spacy, test.spacy from a folder holding SemEval2010_task8_all_data/."""
    return write_docbins(semeval_splits(src_dir, markers), out_dir)


def semeval_label(doc: Doc, threshold: float = 0.5) -> str:
    """The 19-way label of a Doc over its two ents (e1 first): its highest-scoring relation between
    e1 and e2 in either direction, "Other" when there is none with score >= threshold."""
    register_extensions()
    if len(doc.ents) != 2:
        raise ValueError(f"SemEval Doc {doc.user_data.get('semeval_id')}: {len(doc.ents)} ents, expected e1 and e2")
    e1, e2 = ((ent.start, ent.end) for ent in doc.ents)
    candidates = [
        relation
        for relation in doc._.relations
        if {relation.head, relation.tail} == {e1, e2} and relation.head != relation.tail and relation.score >= threshold
    ]
    if not candidates:
        return OTHER
    best = max(candidates, key=lambda relation: relation.score)
    return f"{best.label}({'e1,e2' if best.head == e1 else 'e2,e1'})"


def score_semeval(examples: Iterable[Example], threshold: float = 0.5) -> Dict[str, float]:
    """The official scorer over Examples (gold: reference, system: predicted), as flat `rel_semeval_*` scores."""
    examples = list(examples)
    scores = semeval_official_scores(
        [semeval_label(example.reference) for example in examples],
        [semeval_label(example.predicted, threshold) for example in examples],
    )
    official = scores["with_direction"]
    return {
        "rel_semeval_macro_f1": scores["macro_f1"],
        "rel_semeval_macro_p": official["macro_p"],
        "rel_semeval_macro_r": official["macro_r"],
        "rel_semeval_micro_f1": official["micro_f1"],
        "rel_semeval_19way_macro_f1": scores["19_way"]["macro_f1"],
        "rel_semeval_accuracy": official["accuracy"],
    }
