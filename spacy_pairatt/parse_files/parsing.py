"""`python -m spacy_pairatt parse`: read documents lazily, parse them, write each one as it comes out.

Nothing here holds the whole input: lines are read as the parser asks for documents, and every
parsed Doc is written before the next is read. The readers and writers are shared with the Dask
scale-out (distributed.py), so a shard's output is the single-process output for its documents.

Faults: an input error (a line that is not UTF-8, malformed CoNLL-U) ends the input there; the
documents before it are still parsed (so the message can say how many) and the run then fails.
Any other error (the pipeline, the output, a worker that dies, Ctrl-C) stops the worker processes
at once. The output goes to a temporary file beside the target, renamed over it only on success.
"""

import json
import multiprocessing
import os
import re
import signal
import sys
import tempfile
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import BinaryIO, Callable, Deque, Dict, Iterable, Iterator, List, Optional, TextIO, Tuple

import spacy
from conllu.exceptions import ParseException
from conllu.models import Token as ConlluToken
from conllu.models import TokenList
from conllu.parser import parse_dict_value, parse_id_value
from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import minibatch
from tqdm import tqdm

# Where each Doc keeps its id and CoNLL-U comments: user data, so it survives worker processes and
# DocBin files.
SOURCE_KEY = "spacy_pairatt_source"
CONLLU_COLUMNS = 10
# Batches sent ahead to each worker process: enough to keep it busy, few enough to bound memory.
BATCHES_AHEAD = 2
READ_SIZE = 1 << 16


class ParseCommandError(Exception):
    """A problem with the model, the input or the output, reported to the user without a traceback.

    n_docs: when the error stopped a run, the documents parsed before it.
    """

    n_docs: Optional[int] = None


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

    def where(self) -> str:
        return f"document {self.id} (line {self.line})"


Line = Tuple[int, int, str]
LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def raw_lines(stream: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary stream, each with its line break: LF, CRLF or a bare CR.

    Read in chunks with read1 where there is one, which returns what a pipe holds without waiting
    for a full chunk. A chunk's last CR is held back: it may be the first half of a CRLF.
    """
    read = getattr(stream, "read1", None) or stream.read
    head: List[bytes] = []  # the start of a line that goes on in the next chunk
    held = b""
    while True:
        chunk = read(READ_SIZE)
        data, held = held + chunk, b""
        if chunk and data.endswith(b"\r"):
            data, held = data[:-1], b"\r"
        start = 0
        for match in LINE_BREAK.finditer(data):
            head.append(data[start : match.end()])
            yield b"".join(head)
            head, start = [], match.end()
        if start < len(data):
            head.append(data[start:])
        if not chunk:
            if head:
                yield b"".join(head)
            return


def numbered_lines(stream: BinaryIO, first_line: int = 1, offset: int = 0) -> Iterator[Line]:
    """(line number, byte offset, text without its line break) for each line of a binary stream.

    Bytes rather than text so that the offsets are exact and a worker can seek to them. LF, CRLF
    and a bare CR end a line; a UTF-8 byte order mark at the start of the input is dropped.
    """
    lines = raw_lines(stream)
    number = first_line
    while True:
        try:
            raw = next(lines)
        except StopIteration:
            return
        except OSError as error:
            raise ParseCommandError(f"cannot read the input at line {number}: {error.strerror or error}") from error
        try:
            text = raw.decode("utf8")
        except UnicodeDecodeError as error:
            raise ParseCommandError(
                f"line {number} is not UTF-8 text (byte {offset + error.start + 1}: {error.reason})"
            ) from error
        if offset == 0 and text.startswith("\ufeff"):
            text = text[1:]
        yield number, offset, text.rstrip("\r\n")
        offset += len(raw)
        number += 1


def read_text(lines: Iterable[Line]) -> Iterator[SourceDoc]:
    """One document per non-blank line; its id is its line number."""
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

    Word IDs must run 1, 2, ..., n; a multiword token (ID 3-4) must start at the next word, and its
    words are joined without spaces, the last taking the multiword token's SpaceAfter; empty nodes
    (ID 3.1) are no words. A word whose MISC has SpacesInToken (what this module writes for a
    token with line breaks, tabs or only whitespace) gets that value back as its text.
    """
    comments, words, spaces = [], [], []
    multiword_end, multiword_space, multiword_line = 0, True, 0
    for number, _, text in block:
        if text.startswith("#"):
            comments.append(text[1:].strip())
            continue
        columns = text.split("\t")
        if len(columns) != CONLLU_COLUMNS:
            raise ParseCommandError(
                f"CoNLL-U line {number}: expected {CONLLU_COLUMNS} tab-separated columns, found {len(columns)}"
            )
        try:
            token_id = parse_id_value(columns[0])
            misc = parse_dict_value(columns[9]) or {}
        except ParseException as error:
            raise ParseCommandError(f"CoNLL-U line {number}: {error}") from error
        if token_id is None:
            raise ParseCommandError(f"CoNLL-U line {number}: ID {columns[0]!r} is not a word number")
        if not columns[1]:
            raise ParseCommandError(f"CoNLL-U line {number}: empty FORM")
        space = misc.get("SpaceAfter") != "No"
        if isinstance(token_id, tuple):
            first, kind, last = token_id
            if kind == "-":
                if first != len(words) + 1 or last <= first:
                    raise ParseCommandError(
                        f"CoNLL-U line {number}: multiword token {columns[0]} after word {len(words)}"
                        f" (it must cover words {len(words) + 1}-N, N > {len(words) + 1})"
                    )
                multiword_end, multiword_space, multiword_line = last, space, number
            elif first != len(words):
                raise ParseCommandError(f"CoNLL-U line {number}: empty node {columns[0]} after word {len(words)}")
            continue
        if token_id != len(words) + 1:
            raise ParseCommandError(
                f"CoNLL-U line {number}: word ID {token_id} where {len(words) + 1} was expected (IDs run 1, 2, 3, ...)"
            )
        word_number = token_id
        words.append(unescape_misc(misc["SpacesInToken"]) if misc.get("SpacesInToken") else columns[1])
        spaces.append(space if word_number > multiword_end else word_number == multiword_end and multiword_space)
    first_line, offset = block[0][:2]
    if not words:
        raise ParseCommandError(f"CoNLL-U line {first_line}: a sentence with comments but no word lines")
    if multiword_end > len(words):
        raise ParseCommandError(
            f"CoNLL-U line {multiword_line}: a multiword token ends at word {multiword_end}"
            f" of a sentence of {len(words)} words"
        )
    sent_id = next((value for key, value in map(comment_parts, comments) if key == "sent_id"), None)
    return SourceDoc(
        id=sent_id or str(first_line), line=first_line, offset=offset, words=words, spaces=spaces, comments=comments
    )


READERS: Dict[str, Callable[[Iterable[Line]], Iterator[SourceDoc]]] = {"text": read_text, "conllu": read_conllu}
INPUT_FORMATS = tuple(READERS)


def read_documents(stream: BinaryIO, input_format: str, first_line: int = 1, offset: int = 0) -> Iterator[SourceDoc]:
    """The documents of a binary stream, read as they are asked for."""
    check_choice("input format", input_format, INPUT_FORMATS)
    return READERS[input_format](numbered_lines(stream, first_line, offset))


# What keeps a CoNLL-U file readable by every reader. LINE_BREAKS: what Python's str.splitlines
# (so universal-newline readers) ends a line at. A FORM or LEMMA gets a visible picture for each of
# them and for the tab, and for any whitespace that is not one space between two other characters
# (readers strip lines and the `conllu` library splits columns at two spaces); a whitespace-only
# token is all pictures. The token's exact text then goes into MISC as SpacesInToken (UDPipe's
# name and escapes: \s space, \t tab, \r, \n, \p for |, \\; other whitespace and = as \uXXXX).
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
UNSAFE = frozenset(LINE_BREAKS + "\t")
PICTURES = {
    "\t": "\u2409", "\n": "\u240a", "\v": "\u240b", "\f": "\u240c", "\r": "\u240d",
    "\x1c": "\u241c", "\x1d": "\u241d", "\x1e": "\u241e", "\x1f": "\u241f",
    "\x85": "\u2424", "\u2028": "\u2424", "\u2029": "\u2424",
}  # fmt: skip
SPACE_PICTURE = "\u2423"  # ␣, for spaces and other whitespace without a picture of its own
MISC_ESCAPES = {" ": "\\s", "\t": "\\t", "\n": "\\n", "\r": "\\r", "|": "\\p", "\\": "\\\\"}
MISC_UNESCAPES = {"s": " ", "t": "\t", "n": "\n", "r": "\r", "p": "|", "\\": "\\"}
MISC_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)


def picture(char: str) -> str:
    return PICTURES.get(char, SPACE_PICTURE)


def conllu_form(text: str) -> str:
    """FORM (or LEMMA) for a token's text: pictures for line breaks, tabs and loose whitespace."""
    if not text:
        return "_"
    last = len(text) - 1
    return "".join(
        picture(char)
        if char.isspace() and (char in UNSAFE or i in (0, last) or text[i - 1].isspace() or text[i + 1].isspace())
        else char
        for i, char in enumerate(text)
    )


def conllu_field(text: str) -> Optional[str]:
    """UPOS, XPOS, FEATS, DEPREL: no whitespace at all; None (written `_`) when empty."""
    return "".join(picture(char) if char.isspace() else char for char in text) or None


def conllu_comment(text: str) -> str:
    """A comment (`# text = ...`) on one line of every reader: pictures for line breaks and tabs."""
    return "".join(picture(char) if char in UNSAFE else char for char in text)


def conllu_text(text: str) -> str:
    """The value of `# text`: conllu_comment, and pictures for whitespace at either end (readers strip it)."""
    start, end = len(text) - len(text.lstrip()), len(text.rstrip())
    if end <= start:
        return "".join(map(picture, text))
    return "".join(map(picture, text[:start])) + conllu_comment(text[start:end]) + "".join(map(picture, text[end:]))


def escape_misc(text: str) -> str:
    """A MISC value: UDPipe's escapes, \\uXXXX for other whitespace and `=`."""
    return "".join(
        MISC_ESCAPES.get(char) or (f"\\u{ord(char):04x}" if char.isspace() or char == "=" else char) for char in text
    )


def unescape_misc(value: str) -> str:
    def replace(match: re.Match) -> str:
        code = match.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return MISC_UNESCAPES.get(code, match.group(0))

    return MISC_ESCAPE.sub(replace, value)


def conllu_blocks(doc: Doc) -> str:
    """One CoNLL-U block per sentence: comments, ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC.

    `_` where the pipeline set nothing. A Doc of one sentence keeps its input comments (sent_id,
    text, newdoc...); a Doc split into several sentences gets sent_ids `ID-1`, `ID-2`... The root's
    spaCy label ROOT is written as UD's `root`. Any text gives lines that every reader splits the
    same way (see conllu_form); the token lines are written by the `conllu` library.
    """
    annotated = {attr: doc.has_annotation(attr) for attr in ("LEMMA", "POS", "TAG", "MORPH", "DEP")}
    sentences = list(doc.sents) if doc.has_annotation("SENT_START") or annotated["DEP"] else [doc[:]]
    blocks = []
    for number, sentence in enumerate(sentences, 1):
        tokens = []
        for token in sentence:
            form = conllu_form(token.text)
            misc = {} if token.whitespace_ else {"SpaceAfter": "No"}
            if form != token.text:
                misc["SpacesInToken"] = escape_misc(token.text)
            head = deprel = None
            if annotated["DEP"]:
                if not sentence.start <= token.head.i < sentence.end:
                    raise ParseCommandError(
                        f"the pipeline gave token {token.i} of document {doc.user_data[SOURCE_KEY]['id']} "
                        "a head outside its sentence"
                    )
                is_root = token.head.i == token.i
                head = 0 if is_root else token.head.i - sentence.start + 1
                deprel = conllu_field("root" if is_root and token.dep_ == "ROOT" else token.dep_)
            values = {
                "id": token.i - sentence.start + 1,
                "form": form,
                "lemma": conllu_form(token.lemma_) if annotated["LEMMA"] and token.lemma_ else None,
                "upos": conllu_field(token.pos_) if annotated["POS"] else None,
                "xpos": conllu_field(token.tag_) if annotated["TAG"] else None,
                "feats": conllu_field(str(token.morph)) if annotated["MORPH"] else None,
                "head": head,
                "deprel": deprel,
                "deps": None,
                "misc": misc or None,
            }
            tokens.append(ConlluToken(values))
        comments = sentence_comments(doc, sentence, number, len(sentences))
        blocks.append("".join(f"# {conllu_comment(comment)}\n" for comment in comments))
        blocks.append(TokenList(tokens).serialize())
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
        comments = comments + [f"text = {conllu_text(sentence.text)}"]
    return comments


def comment_parts(comment: str) -> Tuple[str, str]:
    """("sent_id", "abc") for the CoNLL-U comment `sent_id = abc` (without its `#`)."""
    key, _, value = comment.partition("=")
    return key.strip(), value.strip()


# json.dumps(ensure_ascii=False) leaves these raw in strings; str.splitlines would break a line there.
JSON_ESCAPES = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
JSON_ESCAPE = re.compile("[\x85\u2028\u2029]")


def json_line(doc: Doc) -> str:
    """One JSON object per Doc: its id, text and tokens (head: the head token's index in the Doc)."""
    tokens = [
        {"i": t.i, "text": t.text, "head": t.head.i, "dep": t.dep_, "is_sent_start": t.is_sent_start} for t in doc
    ]
    record = {"id": doc.user_data[SOURCE_KEY]["id"], "text": doc.text, "tokens": tokens}
    return JSON_ESCAPE.sub(lambda match: JSON_ESCAPES[match.group()], json.dumps(record, ensure_ascii=False)) + "\n"


TEXT_WRITERS: Dict[str, Callable[[Doc], str]] = {"conllu": conllu_blocks, "json": json_line}


def write_docs(docs: Iterable[Doc], stream: TextIO, output_format: str, progress: bool = False) -> int:
    """Write each Doc as soon as it is parsed; returns how many were written.

    On an error the exception's n_docs is the number written before it, and the documents'
    iterator is closed (which stops worker processes).
    """
    check_choice("output format", output_format, tuple(TEXT_WRITERS))
    writer = TEXT_WRITERS[output_format]
    n_docs = 0
    try:
        for doc in progress_bar(docs, progress, unit="doc"):
            stream.write(writer(doc))
            n_docs += 1
    except ParseCommandError as error:
        error.n_docs = n_docs
        raise
    finally:
        close = getattr(docs, "close", None)
        if close is not None:
            close()
    return n_docs


def progress_bar(iterable: Iterable, enabled: bool, **tqdm_options) -> Iterable:
    """tqdm on stderr, shown only when asked and stderr is a terminal, so pipes and logs stay clean."""
    return tqdm(iterable, disable=not enabled or not sys.stderr.isatty(), file=sys.stderr, **tqdm_options)


def load_pipeline(model: str) -> Language:
    """spacy.load, plus a doc_cleaner at the end; a pipeline that assigns no heads is refused.

    The cleaner drops `Doc._.trf_data` (megabytes of attention per Doc) before Docs are sent back
    from worker processes or saved in a DocBin; heads and labels are already written.
    """
    try:
        nlp = spacy.load(model)
    except (OSError, ValueError) as error:
        raise ParseCommandError(f"cannot load the pipeline {model!r}: {one_line(error)}") from error
    if not any("token.head" in nlp.get_pipe_meta(name).assigns for name in nlp.pipe_names):
        raise ParseCommandError(
            f"the pipeline {model!r} has no component that assigns heads (its components: "
            f"{', '.join(nlp.pipe_names) or 'none'}): parse needs a parser"
        )
    if "doc_cleaner" not in nlp.pipe_names:
        nlp.add_pipe("doc_cleaner")
    return nlp


class StopAtError:
    """The documents of an input until one fails to be read: the error is kept, not raised.

    Given to the parser, an input error thus ends the input in order: the documents before it are
    parsed and the workers stop as at the end of any input. The caller raises `error` afterwards.
    """

    def __init__(self, sources: Iterable[SourceDoc]):
        self.sources = iter(sources)
        self.error: Optional[ParseCommandError] = None

    def __iter__(self) -> "StopAtError":
        return self

    def __next__(self) -> SourceDoc:
        if self.error is not None:
            raise StopIteration
        try:
            return next(self.sources)
        except ParseCommandError as error:
            self.error = error
            raise StopIteration from None


def parse_docs(nlp: Language, sources: Iterable[SourceDoc], batch_size: int = 64, n_process: int = 1) -> Iterator[Doc]:
    """The parsed Docs in input order, each source made a Doc when the parser asks for it.

    n_process > 1 (or -1: one per CPU): forked worker processes (parse_in_processes). An error
    of the pipeline is a ParseCommandError naming the documents it was parsing.
    """
    check_counts(batch_size, n_process)
    if n_process == -1:
        n_process = os.cpu_count() or 1
    if n_process > 1:
        yield from parse_in_processes(nlp, sources, batch_size, n_process)
        return
    recent: Deque[SourceDoc] = deque(maxlen=batch_size)
    n_read = n_parsed = 0

    def docs() -> Iterator[Doc]:
        nonlocal n_read
        for source in sources:
            recent.append(source)
            n_read += 1
            yield source.to_doc(nlp)

    try:
        for doc in nlp.pipe(docs(), batch_size=batch_size):
            n_parsed += 1
            yield doc
    except ParseCommandError:
        raise
    except Exception as error:
        batch = list(recent)[-(n_read - n_parsed) :] if n_read > n_parsed else list(recent)[-1:]
        raise pipeline_error(error, batch) from error


def pipeline_error(error: BaseException, batch: List[SourceDoc]) -> ParseCommandError:
    return ParseCommandError(f"the pipeline failed on {batch_where(batch)}: {type(error).__name__}: {one_line(error)}")


def batch_where(batch: List[SourceDoc]) -> str:
    if not batch:
        return "a document"
    return batch[0].where() if len(batch) == 1 else f"{batch[0].where()} to {batch[-1].where()}"


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


class Worker:
    """A forked process that parses the batches put in its queue and sends back serialised Docs.

    The pipeline is inherited through fork, not pickled. Batches go through a Queue (its feeder
    thread never blocks the caller); results come back through a one-way pipe.
    """

    def __init__(self, context, nlp: Language, batch_size: int):
        self.tasks = context.Queue()
        self.results, sender = context.Pipe(duplex=False)
        self.process = context.Process(target=work, args=(nlp, self.tasks, sender, batch_size), daemon=True)
        self.process.start()
        sender.close()  # so that a worker's death reads as the end of its pipe here

    def receive(self, batch: List[SourceDoc]) -> List[bytes]:
        """The serialised Docs of `batch`, the oldest batch sent to this worker."""
        try:
            wait([self.results, self.process.sentinel])
            if self.results.poll():
                kind, payload = self.results.recv()
                if kind == "docs":
                    return payload
                raise ParseCommandError(f"the pipeline failed on {batch_where(batch)}: {payload}")
        except (EOFError, OSError):
            pass
        self.process.join(1)
        code = self.process.exitcode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        raise ParseCommandError(f"a worker process {how} while parsing {batch_where(batch)}")

    def stop(self, kill: bool) -> None:
        """Ask the worker to finish (kill=False: its queue is empty) or kill it, and free its queue and pipe."""
        if kill:
            self.process.kill()
        else:
            self.tasks.put(None)
        self.process.join(None if kill else 5)
        if self.process.is_alive():  # did not stop when asked: it would hold the exit
            kill = True
            self.process.kill()
            self.process.join()
        self.tasks.close()
        if not kill:
            self.tasks.join_thread()  # the worker read everything: the feeder thread ends
        else:
            # Batches the worker never read would block the queue's feeder thread for good (and, in
            # spaCy's nlp.pipe, the interpreter's exit): read them here so that the thread ends.
            thread, reader = getattr(self.tasks, "_thread", None), getattr(self.tasks, "_reader", None)
            deadline = time.monotonic() + 5
            try:
                while thread is not None and thread.is_alive() and time.monotonic() < deadline:
                    if reader.poll(0.01):
                        os.read(reader.fileno(), READ_SIZE)  # raw bytes: a killed worker may have read half a batch
            except (AttributeError, OSError, ValueError):
                pass  # the thread has sent everything and closed the reader
            if thread is not None:
                thread.join(1)
            self.tasks.cancel_join_thread()
        self.results.close()


def work(nlp: Language, tasks, results, batch_size: int) -> None:
    """A worker process's loop: a batch of SourceDocs in, ("docs", [bytes]) or ("error", text) out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers
    try:
        while True:
            batch = tasks.get()
            if batch is None:
                return
            try:
                docs = nlp.pipe((source.to_doc(nlp) for source in batch), batch_size=batch_size)
                message = ("docs", [doc.to_bytes(exclude=["tensor"]) for doc in docs])
            except Exception as error:
                message = ("error", f"{type(error).__name__}: {one_line(error)}")
            results.send(message)
    except (OSError, EOFError):
        sys.exit(1)  # the parent closed its end: it is stopping
    finally:
        results.close()


def parse_in_processes(nlp: Language, sources: Iterable[SourceDoc], batch_size: int, n_process: int) -> Iterator[Doc]:
    """nlp.pipe's work over forked processes, in input order, stopping them on any error.

    Batch k goes to worker k % n_process; each worker has at most BATCHES_AHEAD batches waiting.
    spaCy's own n_process is not used: after an error its queue feeder threads could block the
    process's exit forever. Here an error (or closing this generator) kills the workers and cancels
    what their queues still hold, so the caller can exit at once.
    """
    if "fork" not in multiprocessing.get_all_start_methods():
        raise ParseCommandError("--n-process above 1 forks the workers, which this platform cannot do")
    context = multiprocessing.get_context("fork")
    # Hugging Face tokenizers used in this process before the fork would warn in every worker.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    workers: List[Worker] = []
    in_flight: Deque[Tuple[Worker, List[SourceDoc]]] = deque()
    batches = enumerate(minibatch(sources, batch_size))
    stopped = False

    def send_next() -> None:
        for index, batch in batches:
            worker = workers[index % n_process]
            worker.tasks.put(batch)
            in_flight.append((worker, batch))
            return

    try:
        for _ in range(n_process):
            workers.append(Worker(context, nlp, batch_size))
        for _ in range(BATCHES_AHEAD * n_process):
            send_next()
        while in_flight:
            worker, batch = in_flight.popleft()
            payload = worker.receive(batch)
            send_next()
            for data in payload:
                yield Doc(nlp.vocab).from_bytes(data)
        for worker in workers:
            worker.stop(kill=False)
        stopped = True
    finally:
        if not stopped:
            for worker in workers:
                worker.stop(kill=True)


class Output:
    """A text stream whose write and flush errors are ParseCommandErrors naming the output."""

    def __init__(self, stream: TextIO, name: str):
        self.stream, self.name = stream, name

    def write(self, text: str) -> None:
        try:
            self.stream.write(text)
        except OSError as error:
            raise self.error(error) from error

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as error:
            raise self.error(error) from error

    def error(self, error: OSError) -> ParseCommandError:
        if isinstance(error, BrokenPipeError) and self.stream is sys.stdout:
            # nobody reads stdout any more: the interpreter's last flush must not fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ParseCommandError(f"cannot write the output {self.name}: {error.strerror or error}")


@dataclass
class OutputTarget:
    """Where parse_file writes, and what a failed run leaves there (for the error message)."""

    path: Optional[str]
    existed: bool = False  # a file was there before the run
    in_place: bool = False  # a special file, written directly

    @property
    def is_stdout(self) -> bool:
        return self.path in (None, "-")

    def failure_note(self, n_docs: int) -> str:
        parsed = f"{n_docs} document{'' if n_docs == 1 else 's'} parsed before the error"
        if self.is_stdout:
            return f"{parsed}, written to stdout"
        if self.in_place:
            return f"{parsed}; {self.path}, not a regular file, was written in place"
        return f"{parsed}; {self.path} {'is unchanged' if self.existed else 'was not written'}"

    @contextmanager
    def open(self) -> Iterator[Output]:
        """stdout; a special file (/dev/null, a FIFO) written in place; else a temporary file beside
        the target, renamed over it on success and removed on failure."""
        self.in_place = self.existed = False
        if self.is_stdout:
            output = Output(sys.stdout, "stdout")
            yield output
            output.flush()
            return
        target = Path(os.path.realpath(self.path))
        if target.is_dir():
            raise ParseCommandError(f"cannot write the output {self.path}: it is a directory")
        self.existed = target.exists()
        if self.existed and not target.is_file():
            self.in_place = True
            with self.open_stream(lambda: open(target, "w", encoding="utf8", newline="\n")) as output:
                yield output
            return
        if not target.parent.is_dir():
            raise ParseCommandError(f"cannot write the output {self.path}: there is no folder {target.parent}")
        mode = target.stat().st_mode & 0o7777 if self.existed else 0o666 & ~current_umask()
        try:
            handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
        except OSError as error:
            raise ParseCommandError(f"cannot write the output {self.path}: {error.strerror or error}") from error
        try:
            with self.open_stream(lambda: os.fdopen(handle, "w", encoding="utf8", newline="\n"), sync=True) as output:
                yield output
            try:
                os.chmod(temporary, mode)
                os.replace(temporary, target)
            except OSError as error:
                raise ParseCommandError(f"cannot write the output {self.path}: {error.strerror or error}") from error
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise

    @contextmanager
    def open_stream(self, opener: Callable[[], TextIO], sync: bool = False) -> Iterator[Output]:
        """An opened stream as Output; flushed (and with sync, on disk) and closed at the end."""
        try:
            stream = opener()
        except OSError as error:
            raise ParseCommandError(f"cannot write the output {self.path}: {error.strerror or error}") from error
        output = Output(stream, self.path)
        try:
            yield output
            output.flush()
            if sync:
                try:
                    os.fsync(stream.fileno())
                except OSError as error:
                    raise output.error(error) from error
        except BaseException:
            try:
                stream.close()
            except OSError:
                pass
            raise
        try:
            stream.close()
        except OSError as error:
            raise output.error(error) from error


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


@contextmanager
def open_input(path: str) -> Iterator[BinaryIO]:
    """The input file as bytes, or stdin for `-`."""
    if path == "-":
        yield sys.stdin.buffer
        return
    if os.path.isdir(path):
        raise ParseCommandError(f"cannot read the input {path}: it is a directory")
    try:
        stream = open(path, "rb")
    except OSError as error:
        raise ParseCommandError(f"cannot read the input {path}: {error.strerror or error}") from error
    with stream:
        yield stream


def check_choice(what: str, value, choices: Tuple) -> None:
    if value not in choices:
        raise ParseCommandError(f"{what} must be one of {', '.join(choices)}, got {value!r}")


def check_counts(batch_size: int, n_process: int = 1) -> None:
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ParseCommandError(f"the batch size must be at least 1, got {batch_size!r}")
    if not isinstance(n_process, int) or not (n_process >= 1 or n_process == -1):
        raise ParseCommandError(f"the number of processes must be at least 1 (or -1: one per CPU), got {n_process!r}")


def parse_stream(
    nlp: Language,
    stream: BinaryIO,
    output: TextIO,
    *,
    input_format: str = "text",
    output_format: str = "conllu",
    batch_size: int = 64,
    n_process: int = 1,
    progress: bool = False,
) -> int:
    """Parse the documents of a binary stream with a loaded pipeline and write them; returns how many.

    An input error is raised once the documents before it are parsed and written; any error's
    n_docs is the number of documents written before it.
    """
    check_choice("output format", output_format, tuple(TEXT_WRITERS))
    check_counts(batch_size, n_process)
    sources = StopAtError(read_documents(stream, input_format))
    n_docs = write_docs(parse_docs(nlp, sources, batch_size, n_process), output, output_format, progress)
    if sources.error is not None:
        sources.error.n_docs = n_docs
        raise sources.error
    return n_docs


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

    Formats, counts and the input are checked before the pipeline is loaded, so mistakes fail fast.
    The output file is written only when the whole input is parsed (see OutputTarget.open); a failed
    run's message says how many documents were parsed before the error.
    """
    check_choice("input format", input_format, INPUT_FORMATS)
    if output_format == "docbin":
        raise ParseCommandError("docbin output is one DocBin per Dask shard: add --dask-workers N or --scheduler")
    check_choice("output format", output_format, tuple(TEXT_WRITERS))
    check_counts(batch_size, n_process)
    with open_input(input_path) as stream:
        nlp = load_pipeline(model)
        target = OutputTarget(output_path)
        try:
            with target.open() as output:
                options = {"input_format": input_format, "output_format": output_format, "progress": progress}
                return parse_stream(nlp, stream, output, batch_size=batch_size, n_process=n_process, **options)
        except ParseCommandError as error:
            if error.n_docs is None:
                raise
            raise ParseCommandError(f"{error} ({target.failure_note(error.n_docs)})") from error
