"""A CoNLL-U file as the CoNLL 2018 evaluation (ud_eval.py) sees it: one string of characters without
spaces, and numpy arrays of tokens, words and sentences as spans of it, with their columns. Every
problem is a UDEvalError naming the line."""

import unicodedata
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Tuple

import numpy as np

CONTENT_RELATIONS = frozenset(
    "nsubj obj iobj csubj ccomp xcomp obl vocative expl dislocated advcl advmod discourse nmod appos nummod acl "
    "amod conj fixed flat compound list parataxis orphan goeswith reparandum root dep".split()
)
FUNCTION_RELATIONS = frozenset("aux cop mark det clf case cc".split())
# The features the 2018 task scores in UFeats; others (NumForm, ExtPos, Typo, ...) are dropped.
UNIVERSAL_FEATURES = frozenset(
    "PronType NumType Poss Reflex Foreign Abbr Gender Animacy Number Case Definite Degree VerbForm Mood Tense "
    "Aspect Voice Evident Polarity Person Polite".split()
)


# The head of a word in a sentence written without syntax (every HEAD `_`, as a segmenter alone
# writes): no word is its dependent, and it is never a correct head.
NO_HEAD = -3


class UDEvalError(ValueError):
    """A CoNLL-U file that cannot be scored, or two files whose texts differ; one line, with the place."""


@dataclass
class Treebank:
    """One CoNLL-U file as the evaluation sees it.

    text: the tokens' characters without spaces; tokens (T, 2), sentences (S, 2), spans (W, 2):
    [start, end) in text (a multiword token's words carry its span); multiword (W,) bool; forms
    (without spaces, as in text),
    lemmas, upos, xpos, feats (universal ones, sorted), relations (universal part): (W,) object
    arrays; heads (W,) int64, -1 for the root; lines (W,) the 1-based line of each word; content and
    function (W,) bool: the relation is in CONTENT_RELATIONS / FUNCTION_RELATIONS.
    """

    text: str
    tokens: np.ndarray
    sentences: np.ndarray
    spans: np.ndarray
    multiword: np.ndarray
    forms: np.ndarray
    lemmas: np.ndarray
    upos: np.ndarray
    xpos: np.ndarray
    feats: np.ndarray
    relations: np.ndarray
    heads: np.ndarray
    lines: np.ndarray
    content: np.ndarray = field(init=False)
    function: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.content = np.array([relation in CONTENT_RELATIONS for relation in self.relations], dtype=bool)
        self.function = np.array([relation in FUNCTION_RELATIONS for relation in self.relations], dtype=bool)

    def __len__(self) -> int:
        return len(self.forms)


def without_spaces(text: str) -> str:
    return "".join(char for char in text if unicodedata.category(char) != "Zs")


def universal_feats(feats: str) -> str:
    return "|".join(sorted(feat for feat in feats.split("|") if feat.split("=", 1)[0] in UNIVERSAL_FEATURES))


@dataclass
class _Reader:
    """Builds a Treebank line by line: one sentence at a time, checked as it ends."""

    name: str
    chars: List[str] = field(default_factory=list)
    length: int = 0
    tokens: List[Tuple[int, int]] = field(default_factory=list)
    sentences: List[Tuple[int, int]] = field(default_factory=list)
    words: List[Tuple] = field(default_factory=list)  # (start, end, multiword, form, lemma, upos, xpos, feats, rel)
    heads: List[int] = field(default_factory=list)
    lines: List[int] = field(default_factory=list)
    sentence_start: Optional[int] = None  # index of the sentence's first word while inside one
    multiword_end: int = 0  # last word ID of the current multiword token
    multiword_span: Tuple[int, int] = (0, 0)

    def fail(self, line: int, message: str) -> UDEvalError:
        return UDEvalError(f"{self.name} line {line}: {message}")

    def read_line(self, number: int, line: str) -> None:
        if self.sentence_start is None:
            if line.startswith("#") or not line.strip():
                return
            self.sentence_start = len(self.words)
            self.sentences.append((self.length, 0))
            self.multiword_end = 0
        if not line.strip():
            self.end_sentence(number)
            return
        columns = line.split("\t")
        if len(columns) != 10:
            raise self.fail(number, f"expected 10 tab-separated columns, found {len(columns)}")
        word_id = columns[0]
        if "." in word_id:
            return  # an empty node: no token, no word
        if "-" in word_id:
            self.read_multiword(number, columns)
        else:
            self.read_word(number, columns)

    def add_token(self, number: int, form: str) -> Tuple[int, int]:
        characters = without_spaces(form)
        if not characters:
            raise self.fail(number, f"FORM {form!r} has no characters besides spaces")
        self.chars.append(characters)
        span = (self.length, self.length + len(characters))
        self.length = span[1]
        self.tokens.append(span)
        return span

    def read_multiword(self, number: int, columns: List[str]) -> None:
        expected = len(self.words) - self.sentence_start + 1
        try:
            first, last = (int(part) for part in columns[0].split("-"))
        except ValueError:
            raise self.fail(number, f"multiword token ID {columns[0]!r} is not N-M") from None
        if first != expected or last < first:
            raise self.fail(
                number, f"multiword token {columns[0]} where a token starting at word {expected} was expected"
            )
        self.multiword_end = last
        self.multiword_span = self.add_token(number, columns[1])

    def read_word(self, number: int, columns: List[str]) -> None:
        expected = len(self.words) - self.sentence_start + 1
        try:
            word_id = int(columns[0])
        except ValueError:
            raise self.fail(number, f"word ID {columns[0]!r} is not a number") from None
        if word_id != expected:
            raise self.fail(number, f"word ID {word_id} where {expected} was expected")
        try:
            head = None if columns[6] == "_" else int(columns[6])
        except ValueError:
            raise self.fail(number, f"HEAD {columns[6]!r} is not a number") from None
        if head is not None and head < 0:
            raise self.fail(number, f"HEAD {head} is negative")
        multiword = word_id <= self.multiword_end
        start, end = self.multiword_span if multiword else self.add_token(number, columns[1])
        _, form, lemma, upos, xpos, feats, _, relation, _, _ = columns
        # without its spaces, as the official script reads FORM: `New York` aligns with `New\u00a0York`
        form = without_spaces(form)
        self.words.append(
            (start, end, multiword, form, lemma, upos, xpos, universal_feats(feats), relation.split(":")[0])
        )
        self.heads.append(head)
        self.lines.append(number)

    def end_sentence(self, number: int) -> None:
        first = self.sentence_start
        n_words = len(self.words) - first
        if n_words == 0:
            raise self.fail(number, "a sentence with no words")
        if self.multiword_end > n_words:
            raise self.fail(number, f"a multiword token ends at word {self.multiword_end} of a sentence of {n_words}")
        heads = self.heads[first:]
        if None in heads:
            if heads.count(None) != n_words:
                raise self.fail(self.lines[first], "HEAD `_` for some words of the sentence and a number for others")
            self.heads[first:] = [NO_HEAD] * n_words
        else:
            self.heads[first:] = self.checked_heads(heads, first, n_words)
        self.sentences[-1] = (self.sentences[-1][0], self.length)
        self.sentence_start = None

    def checked_heads(self, heads: List[int], first: int, n_words: int) -> List[int]:
        """A sentence's HEAD numbers as word indices of the file (-1: the root), each checked."""
        outside = next((i for i, head in enumerate(heads) if head > n_words), None)
        if outside is not None:
            raise self.fail(self.lines[first + outside], f"HEAD {heads[outside]} outside a sentence of {n_words} words")
        if heads.count(0) != 1:
            raise self.fail(self.lines[first], f"the sentence has {heads.count(0)} roots (HEAD 0), not 1")
        return [first + head - 1 if head else -1 for head in heads]

    def finish(self) -> Treebank:
        if self.sentence_start is not None:
            self.end_sentence(self.lines[-1] + 1 if self.lines else 1)
        heads = np.array(self.heads, dtype="int64")
        check_acyclic(heads, np.array(self.lines, dtype="int64"), self.name)
        columns = list(zip(*self.words)) if self.words else [()] * 9
        spans = np.array(list(zip(columns[0], columns[1])), dtype="int64").reshape(-1, 2)
        strings = [np.array(column, dtype=object) for column in columns[3:]]
        return Treebank(
            "".join(self.chars),
            np.array(self.tokens, dtype="int64").reshape(-1, 2),
            np.array(self.sentences, dtype="int64").reshape(-1, 2),
            spans,
            np.array(columns[2], dtype=bool),
            *strings,
            heads,
            np.array(self.lines, dtype="int64"),
        )


def check_acyclic(heads: np.ndarray, lines: np.ndarray, name: str) -> None:
    """Every word must reach its sentence's root: pointer doubling over all sentences at once."""
    n = len(heads)
    ancestors = np.append(np.where(heads < 0, n, heads), n)  # index n: above every root
    for _ in range(max(n, 1).bit_length() + 1):
        ancestors = ancestors[ancestors]
    stuck = np.flatnonzero(ancestors[:n] != n)
    if len(stuck):
        raise UDEvalError(f"{name} line {lines[stuck[0]]}: the word is on or below a cycle of heads")


def read_treebank(lines: Iterable[str], name: str = "<conllu>") -> Treebank:
    """A Treebank from CoNLL-U lines; UDEvalError names the line of the first problem.

    Comments, empty nodes (ID N.M) and extra blank lines are skipped; the file need not end with a
    blank line.
    """
    reader = _Reader(name)
    for number, line in enumerate(lines, 1):
        reader.read_line(number, line.rstrip("\r\n"))
    return reader.finish()


def load_conllu(path) -> Treebank:
    """read_treebank of a file; OSError when it cannot be read, UDEvalError when it is not CoNLL-U."""
    with open(path, encoding="utf-8-sig") as file:  # a byte-order mark is no part of the first line
        try:
            return read_treebank(file, str(path))
        except UnicodeDecodeError as error:
            raise UDEvalError(f"{path}: not UTF-8 ({error.reason} at byte {error.start} of a chunk)") from None
