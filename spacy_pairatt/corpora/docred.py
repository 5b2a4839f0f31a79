"""Re-DocRED (Tan et al. 2022, MIT licence; Wikipedia text, Wikidata relation ids) as spaCy Docs.

One Doc per document, built from the given tokens (a space after each token except before
closing punctuation), with the given sentence starts. Entity mentions are `doc.spans["entities"]`
(label_ = the mention's type, id_ = "E{entity index}", so `entity_mentions` groups them; a mention
listed twice for one entity is kept once). Each `labels` entry is one Relation from the head
entity's first mention to the tail entity's first mention, label = the Wikidata P-id (several
labels of one pair are several relations). `doc.user_data` holds "docred_title" and
"docred_names" (entity id -> its mentions' `name` strings, for the Ign metrics).

Only Re-DocRED's dev and test files are used (its train file and the original DocRED data are not
available here): dev in file order gives train (first 400) and tune (last 100), test stays test.
"""

import json
from itertools import accumulate
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.vocab import Vocab

from ..integration.doc_relations import Relation, entity_mentions
from ..integration.extensions import register_extensions
from .files import fetch_checked, write_docbins
from .relation_metrics import docred_scores

SPANS_KEY = "entities"
REDOCRED_URL = (
    "https://raw.githubusercontent.com/tonytan48/Re-DocRED/ccfb54f5ddf5836027c87badda10f6dfc56efaac/data/{name}"
)
DOCRED_FILES = {
    "dev_revised.json": (
        REDOCRED_URL.format(name="dev_revised.json"),
        "051ee1d057204a5d08ef5502beacdadf191245b5eaf0e29ec2c607cf002c016f",
    ),
    "test_revised.json": (
        REDOCRED_URL.format(name="test_revised.json"),
        "ea673b7ef91e16510d7eb88863d3903e47318dc5653ef361266f27ae3b84723c",
    ),
}
N_TUNE = 100  # the last 100 dev documents, in file order, are the tune split
CLOSING_PUNCTUATION = set(".,;:!?)]}%")

Fact = Tuple[int, Tuple[int, int], Tuple[int, int], str]  # (doc position, head chars, tail chars, relation)


def fetch_docred(dest: Path, local_dir: Optional[Path] = None) -> None:
    """dev_revised.json and test_revised.json into dest (link or download, checksummed)."""
    fetch_checked(dest, DOCRED_FILES, local_dir)


def spaces_after(words: List[str]) -> List[bool]:
    """A space after each word except before closing punctuation and after the last word."""
    return [not set(following) <= CLOSING_PUNCTUATION for following in words[1:]] + [False]


def docred_doc(vocab: Vocab, record: dict) -> Doc:
    """One Re-DocRED document as a Doc; a bad mention or label raises naming the document."""
    title = record.get("title", "<no title>")
    sents = record["sents"]
    if not sents or not all(sents):
        raise ValueError(f"Re-DocRED document {title!r}: a sentence without tokens")
    words = [word for sent in sents for word in sent]
    starts = list(accumulate((len(sent) for sent in sents[:-1]), initial=0))
    sent_starts = [position == 0 for sent in sents for position in range(len(sent))]
    doc = Doc(vocab, words=words, spaces=spaces_after(words), sent_starts=sent_starts)
    spans, names, first_mentions = [], {}, []
    for index, entity in enumerate(record["vertexSet"]):
        if not entity:
            raise ValueError(f"Re-DocRED document {title!r}: entity {index} has no mention")
        offsets: Dict[Tuple[int, int], str] = {}
        for mention in entity:
            sent_id, (start, end) = mention["sent_id"], mention["pos"]
            if not (0 <= sent_id < len(sents) and 0 <= start < end <= len(sents[sent_id])):
                raise ValueError(
                    f"Re-DocRED document {title!r}: mention {mention.get('name')!r} of entity {index} at tokens "
                    f"[{start}, {end}) of sentence {sent_id} lies outside that sentence"
                )
            offsets.setdefault((starts[sent_id] + start, starts[sent_id] + end), mention["type"])
        entity_id = f"E{index}"
        spans += [
            Span(doc, start, end, label=kind, span_id=entity_id) for (start, end), kind in sorted(offsets.items())
        ]
        names[entity_id] = sorted({mention["name"] for mention in entity})
        first_mentions.append(min(offsets))
    doc.spans[SPANS_KEY] = spans
    relations = []
    for label in record["labels"]:
        if not (0 <= label["h"] < len(first_mentions) and 0 <= label["t"] < len(first_mentions)):
            raise ValueError(f"Re-DocRED document {title!r}: label {label} names an entity that does not exist")
        relations.append(Relation(first_mentions[label["h"]], first_mentions[label["t"]], label["r"]))
    doc._.relations = relations
    doc.user_data["docred_title"] = title
    doc.user_data["docred_names"] = names
    return doc


def read_docred(path: Path, vocab: Optional[Vocab] = None) -> Iterator[Doc]:
    """The documents of a (Re-)DocRED JSON file, in file order."""
    register_extensions()
    vocab = vocab or Vocab()
    for record in json.loads(path.read_text(encoding="utf8")):
        yield docred_doc(vocab, record)


def docred_splits(src_dir: Path) -> Dict[str, List[Doc]]:
    """train: the first 400 Re-DocRED dev documents, tune: the last 100 (file order), test: all 500."""
    vocab = Vocab()
    dev = list(read_docred(src_dir / "dev_revised.json", vocab))
    return {
        "train": dev[:-N_TUNE],
        "tune": dev[-N_TUNE:],
        "test": list(read_docred(src_dir / "test_revised.json", vocab)),
    }


def convert_docred(src_dir: Path, out_dir: Path) -> Dict[str, Path]:
    """OUT_DIR/train.spacy, tune.spacy, test.spacy from a folder holding dev_revised.json and test_revised.json."""
    return write_docbins(docred_splits(src_dir), out_dir)


def _chars(doc: Doc, offsets: Tuple[int, int]) -> Tuple[int, int]:
    span = doc[offsets[0] : offsets[1]]
    return span.start_char, span.end_char


def docred_facts(docs: Iterable[Doc]) -> Dict[Fact, float]:
    """Each Doc's relations as facts -> score, keyed by the Doc's position and character offsets, so a
    predicted Doc tokenised differently from its gold Doc still matches; a repeated fact keeps its best score."""
    register_extensions()
    facts: Dict[Fact, float] = {}
    for position, doc in enumerate(docs):
        for relation in doc._.relations:
            fact = (position, _chars(doc, relation.head), _chars(doc, relation.tail), relation.label)
            facts[fact] = max(relation.score, facts.get(fact, relation.score))
    return facts


def _names_by_first_mention(doc: Doc) -> Dict[Tuple[int, int], Set[str]]:
    """Mention names of the entities whose first mention has these character offsets."""
    names: Dict[Tuple[int, int], Set[str]] = {}
    for mentions in entity_mentions(doc.spans[SPANS_KEY]):
        first = mentions[0]
        names.setdefault((first.start_char, first.end_char), set()).update(doc.user_data["docred_names"][first.id_])
    return names


def _gold_fact_names(docs: Iterable[Doc]) -> Iterator[Tuple[Fact, Set[str], Set[str]]]:
    """Each gold fact with the mention names of its head and tail entity."""
    for position, doc in enumerate(docs):
        names = _names_by_first_mention(doc)
        for _, head, tail, label in docred_facts([doc]):
            yield (position, head, tail, label), names[head], names[tail]


def name_triples(docs: Iterable[Doc]) -> Set[Tuple[str, str, str]]:
    """(head mention name, tail mention name, relation) for every name pair of every gold fact: the
    official `fact_in_train` when `docs` are the training documents."""
    return {
        (head_name, tail_name, fact[3])
        for fact, head_names, tail_names in _gold_fact_names(docs)
        for head_name in head_names
        for tail_name in tail_names
    }


def seen_in_training(docs: Iterable[Doc], train_triples: Set[Tuple[str, str, str]]) -> Set[Fact]:
    """The gold facts of `docs` that DocRED's Ign metrics discount: some name pair of head and tail
    forms a training triple with the relation."""
    return {
        fact
        for fact, head_names, tail_names in _gold_fact_names(docs)
        if any((head, tail, fact[3]) in train_triples for head in head_names for tail in tail_names)
    }


def score_docred(examples: Iterable[Example], train_triples: Set[Tuple[str, str, str]], theta: float) -> Dict:
    """`docred_scores` over Examples (gold: reference, system: predicted), keys prefixed "rel_docred_"."""
    examples = list(examples)
    gold_docs = [example.reference for example in examples]
    scores = docred_scores(
        docred_facts(gold_docs),
        docred_facts(example.predicted for example in examples),
        seen_in_training(gold_docs, train_triples),
        theta,
    )
    return {f"rel_docred_{name}": value for name, value in scores.items()}
