"""NLTK's Penn Treebank sample (10% of WSJ, dependency-converted) as spaCy Docs with heads.

The sample is `dependency_treebank` of nltk_data: 199 files dependency_treebank/wsj_0001.dp ..
wsj_0199.dp (WSJ sections 00-01), 3,914 sentences, 94,084 tokens, in Malt-TAB: one token per line
with three tab-separated columns WORD, POS (PTB tag), HEAD (1-based, 0 for the root); sentences
separated by a blank line. It has no dependency labels, so only UAS means anything on it. Licence:
"(C) LDC 1995 ... made available under fair use ... for non-commercial use only".

One Doc per sentence: the words (joined by single spaces), `tag_` from POS, `head` from HEAD,
and a placeholder `dep_`: "ROOT" on the root, "punct" on the PTB punctuation tags (`` '' , . :),
"dep" elsewhere. With "punct", `dep_uas` leaves punctuation out as the PTB convention (and the
paper) does; the parser learns three labels that say nothing beyond the arcs, so LAS is moot.
The files are split in name order: the first 80% train, the next 10% dev, the rest test.
"""

import hashlib
import io
import urllib.request
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..core.tree_checks import head_array_problem
from ..runs.scratch import naming_path
from .files import DOWNLOAD_TIMEOUT, sha256_lf, write_docbins

TREEBANK_DIR = "dependency_treebank"
FILE_PATTERN = "wsj_*.dp"
NLTK_DATA_COMMIT = "5db857e6f7df11eabb5e5665836db9ec8df07e28"
PTB_ZIP_URL = (
    f"https://raw.githubusercontent.com/nltk/nltk_data/{NLTK_DATA_COMMIT}/packages/corpora/dependency_treebank.zip"
)
# SHA-256 of the lines "NAME<TAB>sha256_lf(file)" of the 199 .dp files in name order: one digest
# checks a linked copy and an unpacked download alike.
PTB_FILES_SHA256 = "9a9763404d9a00ce9462b287334927f5d66f3e6bd1f7e27a7e5ee9be256f5d9f"
PTB_COLUMNS = 3
PUNCTUATION_TAGS = frozenset({"``", "''", ",", ".", ":"})
ROOT_LABEL, PUNCT_LABEL, DEP_LABEL = "ROOT", "punct", "dep"
SPLIT_SHARES = {"train": 0.8, "dev": 0.1}  # test: the files left


def treebank_files(src_dir: Path) -> List[Path]:
    """The .dp files under SRC_DIR/dependency_treebank/, in name order."""
    files = sorted((src_dir / TREEBANK_DIR).glob(FILE_PATTERN))
    if not files:
        raise ValueError(f"no {TREEBANK_DIR}/{FILE_PATTERN} files under {src_dir}")
    return files


def files_digest(files: Sequence[Path]) -> str:
    """SHA-256 of "NAME<TAB>sha256_lf(file)" lines: one checksum for a folder of files."""
    listing = "".join(f"{path.name}\t{sha256_lf(path)}\n" for path in files)
    return hashlib.sha256(listing.encode("utf8")).hexdigest()


def fetch_ptb(dest: Path, local_dir: Optional[Path] = None) -> None:
    """DEST/dependency_treebank/*.dp: symlinks into LOCAL_DIR/dependency_treebank/ when it has the
    files, else unpacked from nltk_data's dependency_treebank.zip (pinned commit); checksummed."""
    target_dir = dest / TREEBANK_DIR
    target_dir.mkdir(parents=True, exist_ok=True)
    for old in target_dir.glob(FILE_PATTERN):
        old.unlink()
    local_files = sorted((local_dir / TREEBANK_DIR).glob(FILE_PATTERN)) if local_dir is not None else []
    if local_files:
        for source in local_files:
            (target_dir / source.name).symlink_to(source.resolve())
        how = f"linked from {local_dir / TREEBANK_DIR}"
    else:
        with urllib.request.urlopen(PTB_ZIP_URL, timeout=DOWNLOAD_TIMEOUT) as response:
            archive = zipfile.ZipFile(io.BytesIO(response.read()))
        for member in archive.namelist():
            if Path(member).parent.name == TREEBANK_DIR and Path(member).match(FILE_PATTERN):
                with naming_path(target_dir / Path(member).name):
                    (target_dir / Path(member).name).write_bytes(archive.read(member))
        how = f"unpacked from {PTB_ZIP_URL}"
    files = treebank_files(dest)
    actual = files_digest(files)
    if actual != PTB_FILES_SHA256:
        for path in files:  # nothing unchecked stays for ptb-convert to read
            path.unlink()
        raise ValueError(
            f"{target_dir} ({how}) failed its checksum: its {len(files)} files have digest {actual}, "
            f"expected {PTB_FILES_SHA256}"
        )
    print(f"{TREEBANK_DIR}: {len(files)} files {how}, checksum ok")


Sentence = Tuple[List[str], List[str], np.ndarray]


def malt_tab_blocks(path: Path) -> Iterator[List[Tuple[int, str]]]:
    """(line number, line) of each sentence: runs of non-blank lines."""
    block: List[Tuple[int, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf8").splitlines(), 1):
        if line.strip():
            block.append((number, line))
        elif block:
            yield block
            block = []
    if block:
        yield block


def read_malt_tab(path: Path) -> Iterator[Sentence]:
    """(words, tags, heads) per sentence of a Malt-TAB file; heads are 1-based with 0 for the root.

    A malformed line or a sentence that is not one tree raises ValueError naming the file, the
    sentence and the line.
    """
    for sentence, block in enumerate(malt_tab_blocks(path), 1):
        rows = []
        for number, line in block:
            row = line.split("\t")
            if len(row) != PTB_COLUMNS or not row[0] or not row[2].isdigit():
                raise ValueError(
                    f"{path}, sentence {sentence}, line {number}: {line!r} is not WORD<TAB>POS<TAB>HEAD "
                    "with HEAD a number"
                )
            rows.append(row)
        heads = np.array([int(row[2]) for row in rows])
        problem = head_array_problem(heads)
        if problem:
            raise ValueError(f"{path}, sentence {sentence} (line {block[0][0]}): {problem}")
        yield [row[0] for row in rows], [row[1] for row in rows], heads


def sentence_doc(vocab: Vocab, words: List[str], tags: List[str], heads: np.ndarray) -> Doc:
    """One sentence as a Doc with tags, heads (the root heads itself) and placeholder labels."""
    positions = np.arange(len(words))
    absolute = np.where(heads == 0, positions, heads - 1)
    deps = [
        ROOT_LABEL if head == 0 else PUNCT_LABEL if tag in PUNCTUATION_TAGS else DEP_LABEL
        for head, tag in zip(heads, tags)
    ]
    spaces = [True] * (len(words) - 1) + [False]
    return Doc(vocab, words=words, spaces=spaces, tags=tags, heads=absolute.tolist(), deps=deps)


def read_ptb_file(path: Path, vocab: Vocab) -> List[Doc]:
    docs = []
    for number, (words, tags, heads) in enumerate(read_malt_tab(path), 1):
        doc = sentence_doc(vocab, words, tags, heads)
        doc.user_data["ptb_file"], doc.user_data["ptb_sentence"] = path.name, number
        docs.append(doc)
    return docs


def split_files(files: Sequence[Path]) -> Dict[str, List[Path]]:
    """train: the first 80% of the files (rounded), dev: the next 10%, test: the rest, in name order."""
    n_train = round(len(files) * SPLIT_SHARES["train"])
    n_dev = round(len(files) * SPLIT_SHARES["dev"])
    return {
        "train": list(files[:n_train]),
        "dev": list(files[n_train : n_train + n_dev]),
        "test": list(files[n_train + n_dev :]),
    }


def ptb_splits(src_dir: Path) -> Dict[str, List[Doc]]:
    """Docs per split; the 199 sample files give 159 / 20 / 20 files."""
    vocab = Vocab()
    return {
        name: [doc for path in files for doc in read_ptb_file(path, vocab)]
        for name, files in split_files(treebank_files(src_dir)).items()
    }


def convert_ptb(src_dir: Path, out_dir: Path) -> Dict[str, Path]:
    """OUT_DIR/train.spacy, dev.spacy, test.spacy from a folder holding dependency_treebank/."""
    return write_docbins(ptb_splits(src_dir), out_dir)
