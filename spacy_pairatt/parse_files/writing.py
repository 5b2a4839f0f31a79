"""The parse command's output formats: CoNLL-U blocks and JSON lines, one Doc at a time."""

import json
import re
import sys
from typing import Callable, Dict, Iterable, List, Optional, TextIO

from conllu.models import Token as ConlluToken
from conllu.models import TokenList
from spacy.tokens import Doc, Span, Token
from tqdm import tqdm

from ..components.tokenizer import multiword_tokens
from .errors import ParseCommandError, check_choice
from .reading import SOURCE_KEY, comment_parts

# What keeps a CoNLL-U file readable by every reader. LINE_BREAKS: what Python's str.splitlines
# (so universal-newline readers) ends a line at. A FORM or LEMMA gets a visible picture for each of
# them and for the tab, and for any whitespace that is not one space between two other characters
# (readers strip lines and the `conllu` library splits columns at two spaces). The token's exact
# text then goes into MISC as SpacesInToken (UDPipe's name and escapes: \s space, \t tab, \r, \n,
# \p for |, \\; other whitespace and = as \uXXXX). A whitespace-only token is no word at all: its
# text goes into SpacesBefore / SpacesAfter, with the same escapes (see DocSpacing).
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
UNSAFE = frozenset(LINE_BREAKS + "\t")
PICTURES = {
    "\t": "\u2409", "\n": "\u240a", "\v": "\u240b", "\f": "\u240c", "\r": "\u240d",
    "\x1c": "\u241c", "\x1d": "\u241d", "\x1e": "\u241e", "\x1f": "\u241f",
    "\x85": "\u2424", "\u2028": "\u2424", "\u2029": "\u2424",
}  # fmt: skip
SPACE_PICTURE = "\u2423"  # ␣, for spaces and other whitespace without a picture of its own
MISC_ESCAPES = {" ": "\\s", "\t": "\\t", "\n": "\\n", "\r": "\\r", "|": "\\p", "\\": "\\\\"}


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


def escaped_text_comment(text: str) -> str:
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


def conllu_blocks(doc: Doc) -> str:
    """One CoNLL-U block per sentence: comments, ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC.

    `_` where the pipeline set nothing. A Doc of one sentence keeps its input comments (sent_id,
    text, newdoc...); a Doc split into several sentences gets sent_ids `ID-1`, `ID-2`... The root's
    spaCy label ROOT is written as UD's `root`. English tokens written together that UD makes one
    token (`do` `n't`) get a multiword token line before their words (see multiword_line). Any text
    gives lines that every reader splits the same way (see conllu_form); the token lines are written
    by the `conllu` library.

    Whitespace is not a word in UD: spaCy's whitespace tokens stay out of the words and go into MISC
    (see DocSpacing), and a sentence made only of them is no sentence, so the output scores against a
    gold file of the same text.
    """
    annotated = {attr: doc.has_annotation(attr) for attr in ("LEMMA", "POS", "TAG", "MORPH", "DEP")}
    spans = list(doc.sents) if doc.has_annotation("SENT_START") or annotated["DEP"] else [doc[:]]
    spacing = DocSpacing(doc)
    sentences = [span for span in spans if any(not token.is_space for token in span)]
    blocks = []
    for number, sentence in enumerate(sentences, 1):
        words = [token for token in sentence if not token.is_space]
        ids = {token.i: k for k, token in enumerate(words, 1)}
        runs = {sentence[run.start].i: sentence[run.start : run.stop] for run in multiword_tokens(sentence)}
        inside = {token.i for run in runs.values() for token in run}
        heads = word_heads(doc, sentence, words) if annotated["DEP"] else {}
        tokens = []
        for token in words:
            if token.i in runs:
                run = runs[token.i]
                tokens.append(multiword_line(run, ids[run[0].i], ids[run[-1].i], spacing.misc(run[0], run[-1])))
            head_word = heads.get(token.i)
            # confidence describes the token's own arc: none for a word re-hung from a whitespace token
            written_own_arc = (token.head.i == token.i) if head_word is None else (head_word.i == token.head.i)
            misc = word_misc(token, spacing, token.i in inside, with_confidence=written_own_arc)
            head = deprel = None
            if annotated["DEP"]:
                head = 0 if head_word is None else ids[head_word.i]
                # UD's `root` for spaCy's ROOT and for a word made the root in place of a whitespace token
                is_root = head_word is None and (token.head.i != token.i or token.dep_ == "ROOT")
                deprel = conllu_field("root" if is_root else token.dep_)
            values = {
                "id": ids[token.i],
                "form": conllu_form(token.text),
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
        text = doc.text[words[0].idx : words[-1].idx + len(words[-1])]
        comments = sentence_comments(doc, text, number, len(sentences))
        blocks.append("".join(f"# {conllu_comment(comment)}\n" for comment in comments))
        blocks.append(TokenList(tokens).serialize())
    return "".join(blocks)


def word_misc(token: Token, spacing: "DocSpacing", in_multiword_token: bool, with_confidence: bool) -> Dict[str, str]:
    """A word's MISC: its whitespace (none inside a multiword token, whose line carries it),
    SpacesInToken where its FORM got pictures, and the parser's confidence where the written head
    is the token's own (with_confidence)."""
    misc = {} if in_multiword_token else spacing.misc(token, token)
    if conllu_form(token.text) != token.text:
        misc["SpacesInToken"] = escape_misc(token.text)
    if with_confidence:
        misc.update(confidence_misc(token))
    return misc


class DocSpacing:
    """Where a Doc's whitespace goes in CoNLL-U: the whitespace before its first word, and after each
    word up to the next (its own trailing space and any whitespace tokens), so that the words and
    their MISC give back the Doc's text exactly."""

    def __init__(self, doc: Doc):
        self.first_word: Optional[int] = None
        self.before = ""
        self.after: Dict[int, str] = {}
        last_word = None
        for token in doc:
            if not token.is_space:
                self.first_word = token.i if self.first_word is None else self.first_word
                self.after[token.i] = token.whitespace_
                last_word = token.i
            elif last_word is None:
                self.before += token.text_with_ws
            else:
                self.after[last_word] += token.text_with_ws

    def misc(self, first: Token, last: Token) -> Dict[str, str]:
        """MISC of a word or multiword token from `first` to `last`: SpacesBefore on the Doc's first
        word, SpaceAfter=No where no whitespace follows, SpacesAfter (escaped) where it is not one space."""
        misc = {}
        if first.i == self.first_word and self.before:
            misc["SpacesBefore"] = escape_misc(self.before)
        after = self.after[last.i]
        if not after:
            misc["SpaceAfter"] = "No"
        elif after != " ":
            misc["SpacesAfter"] = escape_misc(after)
        return misc


def word_heads(doc: Doc, sentence: Span, words: List[Token]) -> Dict[int, Optional[Token]]:
    """Each word's head among the sentence's words; None for the root.

    A word whose head is a whitespace token takes its nearest ancestor that is a word; the first
    word left without one is the root, and any other such word hangs from it.
    """
    heads: Dict[int, Optional[Token]] = {}
    for token in words:
        if not sentence.start <= token.head.i < sentence.end:
            raise ParseCommandError(
                f"the pipeline gave token {token.i} of document {doc.user_data[SOURCE_KEY]['id']} "
                "a head outside its sentence"
            )
        heads[token.i] = next((ancestor for ancestor in token.ancestors if not ancestor.is_space), None)
    top = [token for token in words if heads[token.i] is None]
    for token in top[1:]:
        heads[token.i] = top[0]
    return heads


def multiword_line(surface: Span, first_id: int, last_id: int, misc: Dict[str, str]) -> ConlluToken:
    """The line `2-3 don't` of a UD multiword token over the words `surface`; it carries the spacing
    MISC (see DocSpacing), and its words none (tokenizer.multiword_tokens says which)."""
    values = {"id": (first_id, "-", last_id), "form": conllu_form(surface.text)}
    values.update(dict.fromkeys(("lemma", "upos", "xpos", "feats", "head", "deprel", "deps")))
    values["misc"] = misc or None
    return ConlluToken(values)


def sentence_comments(doc: Doc, text: str, number: int, n_sentences: int) -> List[str]:
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
        comments = comments + [f"text = {escaped_text_comment(text)}"]
    return comments


# json.dumps(ensure_ascii=False) leaves these raw in strings; str.splitlines would break a line there
# (the other line breaks of LINE_BREAKS are control characters, which json.dumps escapes).
JSON_ESCAPES = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
JSON_ESCAPE = re.compile("[\x85\u2028\u2029]")


def confidence_misc(token) -> Dict[str, str]:
    """HeadProb= and DepProb= (4 decimals) where the parser stored its confidence (`integration/doc_confidence.py`)."""
    head_prob = token._.head_prob if token.has_extension("head_prob") else None
    if head_prob is None:
        return {}
    return {"HeadProb": f"{head_prob:.4f}", "DepProb": f"{token._.dep_prob:.4f}"}


def json_line(doc: Doc) -> str:
    """One JSON object per Doc: its id, text and tokens (head: the head token's index in the Doc;
    head_prob, dep_prob and head_candidates where the parser stored its confidence) and, with
    confidence, each sentence's parse_confidence."""
    tokens = [
        {"i": t.i, "text": t.text, "head": t.head.i, "dep": t.dep_, "is_sent_start": t.is_sent_start} for t in doc
    ]
    record = {"id": doc.user_data[SOURCE_KEY]["id"], "text": doc.text, "tokens": tokens}
    if doc.has_extension("pairatt_confidence") and doc._.pairatt_confidence is not None:
        for token, values in zip(doc, tokens):
            values.update(head_prob=token._.head_prob, dep_prob=token._.dep_prob)
            values["head_candidates"] = token._.head_candidates
        record["sentences"] = [
            {"start": sent.start, "end": sent.end, "parse_confidence": sent._.parse_confidence} for sent in doc.sents
        ]
    return json_record_line(record)


def json_record_line(record: Dict) -> str:
    """One JSON object on one line for every reader, str.splitlines included (JSON_ESCAPES)."""
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
