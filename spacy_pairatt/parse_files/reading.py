"""The parse command's input, read lazily: text (a document per line), paragraphs (a document per
run of lines up to a blank line) or CoNLL-U (a document per sentence).

Bytes rather than text, so each document knows its byte offset and a worker or a Dask shard can seek
to it. An input error is a ParseCommandError naming the line.
"""

import re
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from conllu.exceptions import ParseException
from conllu.parser import parse_dict_value, parse_id_value
from spacy.language import Language
from spacy.tokens import Doc

from .errors import ParseCommandError, check_choice

# Where each Doc keeps its id and CoNLL-U comments: user data, so it survives worker processes and
# DocBin files.
SOURCE_KEY = "spacy_pairatt_source"
CONLLU_COLUMNS = 10


READ_SIZE = 1 << 16


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


def blocks(lines: Iterable[Line]) -> Iterator[List[Line]]:
    """Runs of non-blank lines, each ended by a blank line or the end of the input."""
    block: List[Line] = []
    for line in lines:
        if line[2].strip():
            block.append(line)
        elif block:
            yield block
            block = []
    if block:
        yield block


def read_paragraphs(lines: Iterable[Line]) -> Iterator[SourceDoc]:
    """One document per paragraph (lines up to a blank line), its lines joined by a line break; its
    id is its first line's number. A paragraph break is thus always a sentence boundary, and a line
    break inside a paragraph (wrapped text) is whitespace the segmenter weighs like any other cue."""
    for block in blocks(lines):
        number, offset, _ = block[0]
        yield SourceDoc(id=str(number), line=number, offset=offset, text="\n".join(text for _, _, text in block))


def read_conllu_sources(lines: Iterable[Line]) -> Iterator[SourceDoc]:
    """One document per CoNLL-U sentence (blocks separated by blank lines)."""
    return map(conllu_sentence, blocks(lines))


def conllu_sentence(block: List[Line]) -> SourceDoc:
    """Words from the FORM column and spaces from SpaceAfter=No, so the treebank's tokenisation is kept.

    Word IDs must run 1, 2, ..., n; a multiword token (ID 3-4) must start at the next word, and its
    words are joined without spaces, the last taking the multiword token's SpaceAfter; empty nodes
    (ID 3.1) are no words. A word whose MISC has SpacesInToken (what this module writes for a
    token with line breaks or tabs) gets that value back as its text. SpacesBefore and SpacesAfter
    (UDPipe's, on a word or a multiword token) become whitespace tokens, as spaCy's tokenizer makes
    them, so the Doc's text is the input's.
    """
    comments, words, spaces = [], [], []
    multiword_start, multiword_end, multiword_spacing, multiword_line = 0, 0, ("", " "), 0
    word_number = 0
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
        if isinstance(token_id, tuple):
            first, kind, last = token_id
            if kind == "-":
                if first != word_number + 1 or last <= first:
                    raise ParseCommandError(
                        f"CoNLL-U line {number}: multiword token {columns[0]} after word {word_number}"
                        f" (it must cover words {word_number + 1}-N, N > {word_number + 1})"
                    )
                multiword_start, multiword_end, multiword_line = first, last, number
                multiword_spacing = misc_spacing(misc, number)
            elif first != word_number:
                raise ParseCommandError(f"CoNLL-U line {number}: empty node {columns[0]} after word {word_number}")
            continue
        if token_id != word_number + 1:
            raise ParseCommandError(
                f"CoNLL-U line {number}: word ID {token_id} where {word_number + 1} was expected (IDs run 1, 2, 3, ...)"
            )
        word_number = token_id
        if word_number > multiword_end:
            before, after = misc_spacing(misc, number)
        else:
            before = multiword_spacing[0] if word_number == multiword_start else ""
            after = multiword_spacing[1] if word_number == multiword_end else ""
        if before:
            words.append(before)
            spaces.append(False)
        words.append(unescape_misc(misc["SpacesInToken"]) if misc.get("SpacesInToken") else columns[1])
        spaces.append(after.startswith(" "))
        more = after[1:] if spaces[-1] else after  # what a Doc's space after the word cannot hold
        if more:
            words.append(more)
            spaces.append(False)
    first_line, offset = block[0][:2]
    if not words:
        raise ParseCommandError(f"CoNLL-U line {first_line}: a sentence with comments but no word lines")
    if multiword_end > word_number:
        raise ParseCommandError(
            f"CoNLL-U line {multiword_line}: a multiword token ends at word {multiword_end}"
            f" of a sentence of {word_number} words"
        )
    sent_id = next((value for key, value in map(comment_parts, comments) if key == "sent_id"), None)
    return SourceDoc(
        id=sent_id or str(first_line), line=first_line, offset=offset, words=words, spaces=spaces, comments=comments
    )


READERS: Dict[str, Callable[[Iterable[Line]], Iterator[SourceDoc]]] = {
    "text": read_text,
    "paragraphs": read_paragraphs,
    "conllu": read_conllu_sources,
}
INPUT_FORMATS = tuple(READERS)


def read_documents(stream: BinaryIO, input_format: str, first_line: int = 1, offset: int = 0) -> Iterator[SourceDoc]:
    """The documents of a binary stream, read as they are asked for."""
    check_choice("input format", input_format, INPUT_FORMATS)
    return READERS[input_format](numbered_lines(stream, first_line, offset))


# SpacesInToken's escapes in MISC (UDPipe's; `writing.escape_misc` writes them).


MISC_UNESCAPES = {"s": " ", "t": "\t", "n": "\n", "r": "\r", "p": "|", "\\": "\\"}
MISC_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)


def unescape_misc(value: str) -> str:
    def replace(match: re.Match) -> str:
        code = match.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return MISC_UNESCAPES.get(code, match.group(0))

    return MISC_ESCAPE.sub(replace, value)


def misc_spacing(misc: Dict[str, str], number: int) -> Tuple[str, str]:
    """(whitespace before, whitespace after) a word or multiword token, from its MISC: SpacesBefore,
    SpacesAfter (escaped), else one space after unless SpaceAfter=No."""
    before = unescape_misc(misc.get("SpacesBefore") or "")
    if misc.get("SpacesAfter"):
        after = unescape_misc(misc["SpacesAfter"])
    else:
        after = "" if misc.get("SpaceAfter") == "No" else " "
    for key, value in (("SpacesBefore", before), ("SpacesAfter", after)):
        if value and not value.isspace():
            raise ParseCommandError(f"CoNLL-U line {number}: {key}={misc[key]} is not whitespace")
    return before, after


def comment_parts(comment: str) -> Tuple[str, str]:
    """("sent_id", "abc") for the CoNLL-U comment `sent_id = abc` (without its `#`)."""
    key, _, value = comment.partition("=")
    return key.strip(), value.strip()


def batch_where(batch: List[SourceDoc]) -> str:
    if not batch:
        return "a document"
    return batch[0].where() if len(batch) == 1 else f"{batch[0].where()} to {batch[-1].where()}"
