"""`python -m spacy_pairatt parse`: read documents lazily, parse them, write each one as it comes out.

Nothing here holds the whole input: lines are read as nlp.pipe asks for documents, and every
parsed Doc is written before the next is read. The readers and writers are shared with the Dask
scale-out (distributed.py), so a shard's output is the single-process output for its documents.
"""

import json
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Dict, Iterable, Iterator, List, Optional, TextIO, Tuple

import spacy
from spacy.language import Language
from spacy.tokens import Doc
from tqdm import tqdm

# Where each Doc keeps its id and CoNLL-U comments: user data, so it survives nlp.pipe's
# worker processes and DocBin files.
SOURCE_KEY = "spacy_pairatt_source"
CONLLU_COLUMNS = 10


class ParseCommandError(Exception):
    """A problem with the model, the input or the output, reported to the user without a traceback."""


@dataclass
class SourceDoc:
    """One input document before tokenisation: a line of text, or a CoNLL-U sentence's words.

    line and offset locate its first line (1-based number, byte offset) so a worker can seek to it.
    """

    id: str
    line: int
    offset: int
    text: Optional[str] = None
    words: Optional[List[str]] = None
    spaces: Optional[List[bool]] = None
    comments: List[str] = field(default_factory=list)

    def to_doc(self, nlp: Language) -> Doc:
        """A CoNLL-U sentence keeps its words and is one sentence; text goes through the tokenizer."""
        if self.words is None:
            doc = nlp.make_doc(self.text)
        else:
            sent_starts = [True] + [False] * (len(self.words) - 1)
            doc = Doc(nlp.vocab, words=self.words, spaces=self.spaces, sent_starts=sent_starts)
        doc.user_data[SOURCE_KEY] = {"id": self.id, "comments": self.comments}
        return doc


Line = Tuple[int, int, str]


def numbered_lines(stream: BinaryIO, first_line: int = 1, offset: int = 0) -> Iterator[Line]:
    """(line number, byte offset, text without its line break) for each line of a binary stream.

    Bytes rather than text so that the offsets are exact and a worker can seek to them.
    """
    for number, raw in enumerate(stream, first_line):
        try:
            text = raw.decode("utf8")
        except UnicodeDecodeError as error:
            raise ParseCommandError(f"line {number} is not UTF-8 text ({error.reason})") from error
        yield number, offset, text.rstrip("\r\n")
        offset += len(raw)


def read_text(lines: Iterable[Line]) -> Iterator[SourceDoc]:
    """One document per non-empty line; its id is its line number."""
    for number, offset, text in lines:
        if text.strip():
            yield SourceDoc(id=str(number), line=number, offset=offset, text=text)


def read_conllu(lines: Iterable[Line]) -> Iterator[SourceDoc]:
    """One document per CoNLL-U sentence (blocks separated by blank lines)."""
    block: List[Line] = []
    for line in lines:
        if line[2].strip():
            block.append(line)
        elif block:
            yield conllu_sentence(block)
            block = []
    if block:
        yield conllu_sentence(block)


def conllu_sentence(block: List[Line]) -> SourceDoc:
    """Words from the FORM column and spaces from SpaceAfter=No, so the treebank's tokenisation is kept.

    The words of a multiword token (ID 3-4) are joined without spaces, the last taking the multiword
    token's SpaceAfter; empty nodes (ID 3.1) are no words.
    """
    comments, words, spaces = [], [], []
    multiword_end, multiword_space = 0, True
    for number, _, text in block:
        if text.startswith("#"):
            comments.append(text[1:].strip())
            continue
        columns = text.split("\t")
        if len(columns) != CONLLU_COLUMNS:
            raise ParseCommandError(
                f"CoNLL-U line {number}: expected {CONLLU_COLUMNS} tab-separated columns, found {len(columns)}"
            )
        token_id, form, misc = columns[0], columns[1], columns[9]
        space = "SpaceAfter=No" not in misc.split("|")
        if "-" in token_id:
            multiword_end, multiword_space = conllu_word_number(token_id.split("-")[-1], number), space
        elif "." not in token_id:
            word_number = conllu_word_number(token_id, number)
            words.append(form)
            spaces.append(space if word_number > multiword_end else word_number == multiword_end and multiword_space)
    first_line, offset = block[0][:2]
    if not words:
        raise ParseCommandError(f"CoNLL-U line {first_line}: a sentence with comments but no word lines")
    sent_id = next((value for key, value in map(comment_parts, comments) if key == "sent_id"), None)
    return SourceDoc(
        id=sent_id or str(first_line), line=first_line, offset=offset, words=words, spaces=spaces, comments=comments
    )


def conllu_word_number(token_id: str, line_number: int) -> int:
    if not token_id.isdigit():
        raise ParseCommandError(f"CoNLL-U line {line_number}: ID {token_id!r} is not a word number")
    return int(token_id)


READERS: Dict[str, Callable[[Iterable[Line]], Iterator[SourceDoc]]] = {"text": read_text, "conllu": read_conllu}
INPUT_FORMATS = tuple(READERS)


def read_documents(stream: BinaryIO, input_format: str, first_line: int = 1, offset: int = 0) -> Iterator[SourceDoc]:
    """The documents of a binary stream, read as they are asked for."""
    check_choice("input format", input_format, INPUT_FORMATS)
    return READERS[input_format](numbered_lines(stream, first_line, offset))


def conllu_blocks(doc: Doc) -> str:
    """One CoNLL-U block per sentence: comments, ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC.

    `_` where the pipeline set nothing. A Doc of one sentence keeps its input comments (sent_id,
    text, newdoc...); a Doc split into several sentences gets sent_ids `ID-1`, `ID-2`... The root's
    spaCy label ROOT is written as UD's `root`.
    """
    annotated = {attr: doc.has_annotation(attr) for attr in ("LEMMA", "POS", "TAG", "MORPH", "DEP")}
    sentences = list(doc.sents) if doc.has_annotation("SENT_START") else [doc[:]]
    blocks = []
    for number, sentence in enumerate(sentences, 1):
        lines = ["# " + comment for comment in sentence_comments(doc, sentence, number, len(sentences))]
        for token in sentence:
            is_root = token.head.i == token.i
            head = "0" if is_root else str(token.head.i - sentence.start + 1)
            deprel = "root" if is_root and token.dep_ == "ROOT" else token.dep_
            columns = [
                str(token.i - sentence.start + 1),
                token.text.replace("\t", " "),
                token.lemma_ if annotated["LEMMA"] else "",
                token.pos_ if annotated["POS"] else "",
                token.tag_ if annotated["TAG"] else "",
                str(token.morph) if annotated["MORPH"] else "",
                head if annotated["DEP"] else "",
                deprel if annotated["DEP"] else "",
                "",
                "" if token.whitespace_ else "SpaceAfter=No",
            ]
            lines.append("\t".join(column or "_" for column in columns))
        blocks.append("\n".join(lines) + "\n\n")
    return "".join(blocks)


def sentence_comments(doc: Doc, sentence, number: int, n_sentences: int) -> List[str]:
    """A one-sentence Doc keeps its input's comments, with sent_id and text added where missing.

    When the pipeline split the Doc into several sentences, the input's sent_id and text no longer
    fit: each sentence gets `sent_id = ID-N` and its own text, and the first also the other comments.
    """
    source = doc.user_data[SOURCE_KEY]
    sent_id = source["id"] if n_sentences == 1 else f"{source['id']}-{number}"
    comments = list(source["comments"]) if number == 1 else []  # a tuple after a DocBin
    if n_sentences > 1:
        comments = [comment for comment in comments if comment_parts(comment)[0] not in ("sent_id", "text")]
    keys = {comment_parts(comment)[0] for comment in comments}
    if "sent_id" not in keys:
        comments = comments + [f"sent_id = {sent_id}"]
    if "text" not in keys:
        comments = comments + [f"text = {sentence.text}"]
    return comments


def comment_parts(comment: str) -> Tuple[str, str]:
    """("sent_id", "abc") for the CoNLL-U comment `sent_id = abc` (without its `#`)."""
    key, _, value = comment.partition("=")
    return key.strip(), value.strip()


def json_line(doc: Doc) -> str:
    """One JSON object per Doc: its id, text and tokens (head: the head token's index in the Doc)."""
    tokens = [
        {"i": t.i, "text": t.text, "head": t.head.i, "dep": t.dep_, "is_sent_start": t.is_sent_start} for t in doc
    ]
    record = {"id": doc.user_data[SOURCE_KEY]["id"], "text": doc.text, "tokens": tokens}
    return json.dumps(record, ensure_ascii=False) + "\n"


TEXT_WRITERS: Dict[str, Callable[[Doc], str]] = {"conllu": conllu_blocks, "json": json_line}


def write_docs(docs: Iterable[Doc], stream: TextIO, output_format: str, progress: bool = False) -> int:
    """Write each Doc as soon as it is parsed; returns how many were written."""
    check_choice("output format", output_format, tuple(TEXT_WRITERS))
    n_docs = 0
    for doc in progress_bar(docs, progress, unit="doc"):
        stream.write(TEXT_WRITERS[output_format](doc))
        n_docs += 1
    return n_docs


def progress_bar(iterable: Iterable, enabled: bool, **tqdm_options) -> Iterable:
    """tqdm on stderr, shown only when asked and stderr is a terminal, so pipes and logs stay clean."""
    return tqdm(iterable, disable=not enabled or not sys.stderr.isatty(), file=sys.stderr, **tqdm_options)


def load_pipeline(model: str) -> Language:
    """spacy.load, plus a doc_cleaner at the end.

    The cleaner drops `Doc._.trf_data` (megabytes of attention per Doc) before Docs are sent back
    from nlp.pipe's worker processes or saved in a DocBin; heads and labels are already written.
    """
    try:
        nlp = spacy.load(model)
    except OSError as error:
        raise ParseCommandError(f"cannot load the pipeline {model!r}: {error}") from error
    if "doc_cleaner" not in nlp.pipe_names:
        nlp.add_pipe("doc_cleaner")
    return nlp


def parse_docs(nlp: Language, sources: Iterable[SourceDoc], batch_size: int = 64, n_process: int = 1) -> Iterator[Doc]:
    """nlp.pipe over the documents, each built when nlp.pipe asks for it.

    With n_process > 1 the forked workers run torch on one thread each (`spacy_pairatt.forking`,
    registered when the pipeline's components are created): the processes are the parallelism.
    """
    docs = (source.to_doc(nlp) for source in sources)
    yield from nlp.pipe(docs, batch_size=batch_size, n_process=n_process)


@contextmanager
def open_input(path: str) -> Iterator[BinaryIO]:
    """The input file as bytes, or stdin for `-`."""
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        stream = open(path, "rb")
    except OSError as error:
        raise ParseCommandError(f"cannot read the input {path}: {error.strerror}") from error
    with stream:
        yield stream


@contextmanager
def open_output(path: Optional[str]) -> Iterator[TextIO]:
    """The output file as UTF-8 text, or stdout when no path or `-` is given."""
    if path in (None, "-"):
        yield sys.stdout
        return
    try:
        stream = open(path, "w", encoding="utf8", newline="\n")
    except OSError as error:
        raise ParseCommandError(f"cannot write the output {path}: {error.strerror}") from error
    with stream:
        yield stream


def check_choice(what: str, value, choices: Tuple) -> None:
    if value not in choices:
        raise ParseCommandError(f"{what} must be one of {', '.join(choices)}, got {value!r}")


def parse_file(
    model: str,
    input_path: str,
    output_path: Optional[str] = None,
    *,
    input_format: str = "text",
    output_format: str = "conllu",
    batch_size: int = 64,
    n_process: int = 1,
    progress: bool = True,
) -> int:
    """Parse a file (or stdin, `-`) with a pipeline and write CoNLL-U or JSON lines; returns the number of Docs.

    Formats and the input are checked before the pipeline is loaded, so mistakes fail fast.
    """
    check_choice("input format", input_format, INPUT_FORMATS)
    if output_format == "docbin":
        raise ParseCommandError("docbin output is one DocBin per Dask shard: add --dask-workers N or --scheduler")
    check_choice("output format", output_format, tuple(TEXT_WRITERS))
    with open_input(input_path) as stream:
        nlp = load_pipeline(model)
        with open_output(output_path) as output:
            docs = parse_docs(nlp, read_documents(stream, input_format), batch_size, n_process)
            return write_docs(docs, output, output_format, progress)
