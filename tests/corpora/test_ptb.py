"""The PTB sample converter on the shipped files, and its errors on malformed ones."""

import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.tokens import DocBin

from spacy_pairatt.cli import main
from spacy_pairatt.core.decoding import is_single_rooted_tree
from spacy_pairatt.core.tree_checks import head_array_problem
from spacy_pairatt.corpora.ptb import (
    TREEBANK_DIR,
    convert_ptb,
    fetch_ptb,
    read_malt_tab,
    split_files,
)
from tests.conftest import DATA

PTB_DIR = DATA / "ptb_sample"


def raw_sentences(path: Path):
    """(words, tags, heads) per sentence, read without the converter."""
    blocks = path.read_text(encoding="utf8").strip("\n").split("\n\n")
    rows = [[line.split("\t") for line in block.split("\n")] for block in blocks]
    return [([r[0] for r in rs], [r[1] for r in rs], [int(r[2]) for r in rs]) for rs in rows]


@pytest.fixture(scope="module")
def shipped():
    if not (PTB_DIR / TREEBANK_DIR).exists():
        pytest.skip(f"PTB sample not found at {PTB_DIR}")
    return PTB_DIR


@pytest.fixture(scope="module")
def converted(shipped, tmp_path_factory):
    """The three splits written by the CLI and read back."""
    out_dir = tmp_path_factory.mktemp("ptb")
    main(["ptb-convert", str(shipped), str(out_dir)])
    vocab = spacy.blank("en").vocab
    splits = ("train", "dev", "test")
    return {name: list(DocBin().from_disk(out_dir / f"{name}.spacy").get_docs(vocab)) for name in splits}


def test_splits_are_the_files_in_name_order(shipped, converted):
    files = sorted(path.name for path in (shipped / TREEBANK_DIR).glob("*.dp"))
    assert len(files) == 199
    split_names = {name: [doc.user_data["ptb_file"] for doc in docs] for name, docs in converted.items()}
    in_order = [name for name in ("train", "dev", "test") for name in dict.fromkeys(split_names[name])]
    assert in_order == files
    assert [len(set(names)) for names in split_names.values()] == [159, 20, 20]


def test_all_sentences_and_tokens_come_through(shipped, converted):
    docs = [doc for name in ("train", "dev", "test") for doc in converted[name]]
    assert len(docs) == 3914
    assert sum(len(doc) for doc in docs) == 94084
    assert [len(converted[name]) for name in ("train", "dev", "test")] == [3396, 273, 245]
    raw = [s for path in sorted((shipped / TREEBANK_DIR).glob("*.dp")) for s in raw_sentences(path)]
    for doc, (words, tags, heads) in zip(docs, raw):
        assert [token.text for token in doc] == words
        assert [token.tag_ for token in doc] == tags
        assert [token.head.i + 1 if token.dep_ != "ROOT" else 0 for token in doc] == heads


def test_each_sentence_is_one_tree_with_placeholder_labels(converted):
    labels = Counter()
    for doc in (doc for docs in converted.values() for doc in docs):
        assert len(list(doc.sents)) == 1
        heads = np.array([0] + [token.head.i + 1 if token.head.i != token.i else 0 for token in doc])
        assert is_single_rooted_tree(heads)
        assert [token.dep_ == "ROOT" for token in doc] == [token.head.i == token.i for token in doc]
        labels.update(token.dep_ for token in doc)
        assert doc.text == " ".join(token.text for token in doc)
    assert set(labels) == {"ROOT", "punct", "dep"}
    assert labels["ROOT"] == 3914
    assert labels["punct"] == 4886 + 3874 + 712 + 694 + 563  # , . `` '' :


def test_split_files_rounds_to_80_10_10():
    files = [Path(f"wsj_{i:04d}.dp") for i in range(1, 11)]
    assert {name: len(part) for name, part in split_files(files).items()} == {"train": 8, "dev": 1, "test": 1}
    assert sum(split_files(files).values(), []) == files


def test_fetch_links_the_local_copy_and_checks_it(shipped, tmp_path):
    fetch_ptb(tmp_path / "ptb", shipped)
    linked = sorted((tmp_path / "ptb" / TREEBANK_DIR).iterdir())
    assert len(linked) == 199 and all(path.is_symlink() for path in linked)

    tampered = tmp_path / "tampered"
    shutil.copytree(shipped / TREEBANK_DIR, tampered / TREEBANK_DIR)
    with (tampered / TREEBANK_DIR / "wsj_0001.dp").open("a", encoding="utf8") as file:
        file.write("\n")
    with pytest.raises(ValueError, match="digest"):
        fetch_ptb(tmp_path / "again", tampered)


@pytest.mark.parametrize(
    "heads, problem",
    [
        ([2, 0, 2], None),
        ([2, 0, 4], "outside 0..3"),
        ([0, 0, 2], r"words \[1, 2\] all have head 0"),
        ([2, 3, 2], "no word has head 0"),
        ([0, 3, 2], r"words \[2, 3\] form a cycle"),
        ([0, 2, 2], r"words \[2\] are their own heads"),
    ],
)
def test_head_array_problem(heads, problem):
    found = head_array_problem(np.array(heads))
    if problem is None:
        assert found is None
    else:
        assert found is not None and re.search(problem, found)


def write_treebank(folder: Path, text: str) -> Path:
    (folder / TREEBANK_DIR).mkdir(parents=True)
    path = folder / TREEBANK_DIR / "wsj_0001.dp"
    path.write_text(text, encoding="utf8")
    return path


GOOD = "The\tDT\t2\ndog\tNN\t3\nbarks\tVBZ\t0\n.\t.\t3\n"


def test_malformed_files_name_the_file_sentence_and_line(tmp_path):
    cycle = write_treebank(tmp_path / "cycle", GOOD + "\nIt\tPRP\t0\nruns\tVBZ\t3\nfast\tRB\t2\n")
    with pytest.raises(ValueError, match=r"wsj_0001.dp, sentence 2 \(line 6\): words \[2, 3\] form a cycle"):
        list(read_malt_tab(cycle))
    write_treebank(tmp_path / "columns", GOOD + "\nIt\tPRP\nruns\tVBZ\t0\n")
    with pytest.raises(ValueError, match=r"wsj_0001.dp, sentence 2, line 6: 'It\\tPRP' is not WORD<TAB>POS<TAB>HEAD"):
        convert_ptb(tmp_path / "columns", tmp_path / "out")
    with pytest.raises(ValueError, match="no dependency_treebank/wsj_"):
        convert_ptb(tmp_path, tmp_path / "out")
