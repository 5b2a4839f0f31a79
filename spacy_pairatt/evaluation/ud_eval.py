"""The CoNLL 2018 shared task's metrics for UD parses (`python -m spacy_pairatt ud-eval`).

Written from the task's published definitions (universaldependencies.org/conll18/evaluation.html):

- Both files are read as one string of characters: every token's FORM without its space characters
  (Unicode category Zs), concatenated. The two strings must be equal; a token, a word and a
  sentence are then each a character span [start, end) of it.
- Tokens and Sentences: a system span is correct when a gold span has the same start and end.
- Words: words of ordinary tokens are aligned when their spans are equal. The words of a multiword
  token all carry the token's span, so around multiword tokens (gold or system) the words are
  aligned inside the smallest region that no multiword token sticks out of, by a longest common
  subsequence of their lowercased FORMs. Words F1 counts the aligned pairs.
- UPOS, XPOS, UFeats (the task's universal features only, sorted), AllTags (all three), Lemmas (a
  gold `_` lemma accepts any lemma): an aligned pair is correct when the column agrees.
- UAS: the system head is aligned to the gold head (or both are the root). LAS: also the universal
  relation (the DEPREL before ':'). CLAS: LAS over content words only (CONTENT_RELATIONS). MLAS:
  CLAS plus UPOS, UFeats and the word's function-word children (FUNCTION_RELATIONS: their alignment,
  relation, UPOS and UFeats). BLEX: CLAS plus the lemma.

Each metric counts correct, gold and system words; precision is correct / system, recall correct /
gold, F1 their harmonic mean, and for the metrics on aligned words AlignedAccuracy is correct /
aligned (pairs whose gold word passes the metric's filter). Counts are taken with numpy over the
aligned pairs; only the alignment walks the words one by one.

Arrays: W words, T tokens, S sentences per file. Word heads are indices into the file's words, -1
for the root.
"""

import json
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

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
METRICS = (
    "Tokens", "Sentences", "Words", "UPOS", "XPOS", "UFeats", "AllTags", "Lemmas", "UAS", "LAS", "CLAS", "MLAS", "BLEX",
)  # fmt: skip
NOT_ALIGNED = -2  # a system word's gold partner when it has none (-1 stays the root)


class UDEvalError(ValueError):
    """A CoNLL-U file that cannot be scored, or two files whose texts differ; one line, with the place."""


@dataclass
class Treebank:
    """One CoNLL-U file as the evaluation sees it.

    text: the tokens' characters without spaces; tokens (T, 2), sentences (S, 2), spans (W, 2):
    [start, end) in text (a multiword token's words carry its span); multiword (W,) bool; forms,
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


@dataclass
class Score:
    """Counts of one metric; precision, recall, F1 and AlignedAccuracy derive from them."""

    correct: int
    gold: int
    system: int
    aligned: Optional[int] = None

    @property
    def precision(self) -> float:
        return self.correct / self.system if self.system else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        total = self.gold + self.system
        return 2 * self.correct / total if total else 0.0

    @property
    def aligned_accuracy(self) -> Optional[float]:
        if self.aligned is None:
            return None
        return self.correct / self.aligned if self.aligned else 0.0

    def to_dict(self) -> Dict:
        values = {"precision": self.precision, "recall": self.recall, "f1": self.f1}
        values.update(correct=self.correct, gold=self.gold, system=self.system)
        if self.aligned is not None:
            values.update(aligned=self.aligned, aligned_accuracy=self.aligned_accuracy)
        return values


# Reading ------------------------------------------------------------------------------------------


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
            head = int(columns[6])
        except ValueError:
            raise self.fail(number, f"HEAD {columns[6]!r} is not a number") from None
        if head < 0:
            raise self.fail(number, f"HEAD {head} is negative")
        multiword = word_id <= self.multiword_end
        start, end = self.multiword_span if multiword else self.add_token(number, columns[1])
        _, form, lemma, upos, xpos, feats, _, relation, _, _ = columns
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
        outside = next((i for i, head in enumerate(heads) if head > n_words), None)
        if outside is not None:
            raise self.fail(self.lines[first + outside], f"HEAD {heads[outside]} outside a sentence of {n_words} words")
        if heads.count(0) != 1:
            raise self.fail(self.lines[first], f"the sentence has {heads.count(0)} roots (HEAD 0), not 1")
        self.heads[first:] = [first + head - 1 if head else -1 for head in heads]
        self.sentences[-1] = (self.sentences[-1][0], self.length)
        self.sentence_start = None

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


def read_conllu(lines: Iterable[str], name: str = "<conllu>") -> Treebank:
    """A Treebank from CoNLL-U lines; UDEvalError names the line of the first problem.

    Comments, empty nodes (ID N.M) and extra blank lines are skipped; the file need not end with a
    blank line.
    """
    reader = _Reader(name)
    for number, line in enumerate(lines, 1):
        reader.read_line(number, line.rstrip("\r\n"))
    return reader.finish()


def load_conllu(path) -> Treebank:
    """read_conllu of a file; OSError when it cannot be read, UDEvalError when it is not CoNLL-U."""
    with open(path, encoding="utf-8-sig") as file:  # a byte-order mark is no part of the first line
        try:
            return read_conllu(file, str(path))
        except UnicodeDecodeError as error:
            raise UDEvalError(f"{path}: not UTF-8 ({error.reason} at byte {error.start} of a chunk)") from None


# Alignment ----------------------------------------------------------------------------------------


def align_words(gold: Treebank, system: Treebank) -> Tuple[np.ndarray, np.ndarray]:
    """(gold word indices, system word indices) of the aligned pairs, in order."""
    g_spans, s_spans = gold.spans.tolist(), system.spans.tolist()
    g_multi, s_multi = gold.multiword.tolist(), system.multiword.tolist()
    pairs: List[Tuple[int, int]] = []
    gi = si = 0
    while gi < len(g_spans) and si < len(s_spans):
        if g_multi[gi] or s_multi[si]:
            gs, ss, gi, si = multiword_region(g_spans, g_multi, s_spans, s_multi, gi, si)
            pairs.extend(lcs_pairs(gold.forms[gs:gi], system.forms[ss:si], gs, ss))
        elif g_spans[gi] == s_spans[si]:
            pairs.append((gi, si))
            gi, si = gi + 1, si + 1
        elif g_spans[gi][0] <= s_spans[si][0]:
            gi += 1
        else:
            si += 1
    if not pairs:
        return np.zeros(0, dtype="int64"), np.zeros(0, dtype="int64")
    return tuple(np.array(column, dtype="int64") for column in zip(*pairs))


def multiword_region(g_spans, g_multi, s_spans, s_multi, gi: int, si: int) -> Tuple[int, int, int, int]:
    """(gold start, system start, gold end, system end) word indices of the region that begins at
    gi / si (one of them a multiword token's word) and that no multiword token sticks out of."""
    if g_multi[gi]:
        end = g_spans[gi][1]
        if not s_multi[si] and s_spans[si][0] < g_spans[gi][0]:
            si += 1
    else:
        end = s_spans[si][1]
        if not g_multi[gi] and g_spans[gi][0] < s_spans[si][0]:
            gi += 1
    gs, ss = gi, si

    def inside(spans, multi, i: int) -> bool:
        if i >= len(spans):
            return False
        return spans[i][0] < end if multi[i] else spans[i][1] <= end

    while inside(g_spans, g_multi, gi) or inside(s_spans, s_multi, si):
        take_gold = gi < len(g_spans) and (si >= len(s_spans) or g_spans[gi][0] <= s_spans[si][0])
        spans, multi, i = (g_spans, g_multi, gi) if take_gold else (s_spans, s_multi, si)
        if multi[i]:
            end = max(end, spans[i][1])
        if take_gold:
            gi += 1
        else:
            si += 1
    return gs, ss, gi, si


def lcs_pairs(gold_forms, system_forms, gold_offset: int, system_offset: int) -> List[Tuple[int, int]]:
    """Pairs of a longest common subsequence of the lowercased forms, read from the left: equal
    forms pair at once; otherwise the gold word is skipped when that keeps the longest length."""
    gold_forms = [form.lower() for form in gold_forms]
    system_forms = [form.lower() for form in system_forms]
    n_gold, n_system = len(gold_forms), len(system_forms)
    # suffix[g][s]: the longest common subsequence of gold_forms[g:] and system_forms[s:]
    suffix = np.zeros((n_gold + 1, n_system + 1), dtype="int64")
    for g in range(n_gold - 1, -1, -1):
        for s in range(n_system - 1, -1, -1):
            match = suffix[g + 1, s + 1] + 1 if gold_forms[g] == system_forms[s] else 0
            suffix[g, s] = max(match, suffix[g + 1, s], suffix[g, s + 1])
    pairs, g, s = [], 0, 0
    while g < n_gold and s < n_system:
        if gold_forms[g] == system_forms[s]:
            pairs.append((gold_offset + g, system_offset + s))
            g, s = g + 1, s + 1
        elif suffix[g, s] == suffix[g + 1, s]:
            g += 1
        else:
            s += 1
    return pairs


# Scores -------------------------------------------------------------------------------------------


def span_score(gold: np.ndarray, system: np.ndarray) -> Score:
    """Spans (N, 2) correct when both ends match a gold span's (each side's starts are distinct)."""
    width = int(max(gold.max(initial=0), system.max(initial=0))) + 1
    correct = len(np.intersect1d(gold[:, 0] * width + gold[:, 1], system[:, 0] * width + system[:, 1]))
    return Score(correct, len(gold), len(system))


def first_difference(gold: str, system: str) -> int:
    shorter = min(len(gold), len(system))
    if gold[:shorter] == system[:shorter]:
        return shorter
    low, high = 0, shorter  # gold[:low] == system[:low], and they differ before high
    while high - low > 1:
        middle = (low + high) // 2
        if gold[low:middle] == system[low:middle]:
            low = middle
        else:
            high = middle
    return low


def check_same_text(gold: Treebank, system: Treebank) -> None:
    if gold.text == system.text:
        return
    at = first_difference(gold.text, system.text)
    raise UDEvalError(
        f"the files' texts differ (spaces aside) at character {at}: gold {gold.text[at : at + 20]!r}, "
        f"system {system.text[at : at + 20]!r}"
    )


def evaluate(gold: Treebank, system: Treebank) -> Dict[str, Score]:
    """Every CoNLL 2018 metric (METRICS) of system against gold."""
    check_same_text(gold, system)
    g, s = align_words(gold, system)
    gold_of = np.full(len(system), NOT_ALIGNED, dtype="int64")  # system word -> its gold word
    gold_of[s] = g
    # the system head of each pair, as a gold word (-1: the root, NOT_ALIGNED: none)
    system_heads = system.heads[s]
    system_head_as_gold = np.where(system_heads < 0, -1, gold_of[np.maximum(system_heads, 0)])

    upos = gold.upos[g] == system.upos[s]
    xpos = gold.xpos[g] == system.xpos[s]
    feats = gold.feats[g] == system.feats[s]
    lemma = (gold.lemmas[g] == "_") | (gold.lemmas[g] == system.lemmas[s])
    head = gold.heads[g] == system_head_as_gold
    labelled = head & (gold.relations[g] == system.relations[s])
    children = function_children_match(gold, system, g, s, gold_of)

    def on_pairs(correct: np.ndarray, content_only: bool = False) -> Score:
        if not content_only:
            return Score(int(correct.sum()), len(gold), len(system), len(g))
        pair_content = gold.content[g]
        return Score(
            int((correct & pair_content).sum()),
            int(gold.content.sum()),
            int(system.content.sum()),
            int(pair_content.sum()),
        )

    return {
        "Tokens": span_score(gold.tokens, system.tokens),
        "Sentences": span_score(gold.sentences, system.sentences),
        "Words": Score(len(g), len(gold), len(system)),
        "UPOS": on_pairs(upos),
        "XPOS": on_pairs(xpos),
        "UFeats": on_pairs(feats),
        "AllTags": on_pairs(upos & xpos & feats),
        "Lemmas": on_pairs(lemma),
        "UAS": on_pairs(head),
        "LAS": on_pairs(labelled),
        "CLAS": on_pairs(labelled, content_only=True),
        "MLAS": on_pairs(labelled & upos & feats & children, content_only=True),
        "BLEX": on_pairs(labelled & lemma, content_only=True),
    }


def function_children_match(
    gold: Treebank, system: Treebank, g: np.ndarray, s: np.ndarray, gold_of: np.ndarray
) -> np.ndarray:
    """Per aligned pair: the two words' function-word children are the same list.

    Each gold child is distinct, so the lists are equal when the gold word has as many function
    children as the system word and each of the system word's children is aligned to a gold
    function child of the gold word with the same relation, UPOS and UFeats.
    """
    gold_child = gold.function & (gold.heads >= 0)
    system_child = system.function & (system.heads >= 0)
    gold_counts = np.bincount(gold.heads[gold_child], minlength=len(gold))
    system_counts = np.bincount(system.heads[system_child], minlength=len(system))
    c = np.flatnonzero(system_child)
    partner = gold_of[c]
    found = partner >= 0
    c, partner = c[found], partner[found]
    same = (
        gold_child[partner]
        & (gold.heads[partner] == gold_of[system.heads[c]])
        & (gold.relations[partner] == system.relations[c])
        & (gold.upos[partner] == system.upos[c])
        & (gold.feats[partner] == system.feats[c])
    )
    matched_counts = np.bincount(system.heads[c[same]], minlength=len(system))
    return (gold_counts[g] == system_counts[s]) & (matched_counts[s] == system_counts[s])


# Files, raw text and reports ----------------------------------------------------------------------


def evaluate_files(gold_path, system_path) -> Dict[str, Score]:
    return evaluate(load_conllu(gold_path), load_conllu(system_path))


def scores_dict(scores: Dict[str, Score]) -> Dict[str, Dict]:
    return {metric: scores[metric].to_dict() for metric in METRICS}


def scores_table(scores: Dict[str, Score]) -> str:
    """A plain-text table: metric, precision, recall, F1 and AlignedAccuracy in percent."""
    lines = [f"{'Metric':<10} {'Precision':>9} {'Recall':>9} {'F1':>9} {'AlignedAcc':>10}"]
    for metric in METRICS:
        score = scores[metric]
        accuracy = "" if score.aligned_accuracy is None else f"{100 * score.aligned_accuracy:10.2f}"
        lines.append(
            f"{metric:<10} {100 * score.precision:9.2f} {100 * score.recall:9.2f} {100 * score.f1:9.2f} {accuracy}"
        )
    return "\n".join(lines)


def document_texts(lines: Iterable[str]) -> List[str]:
    """The raw text of each document of a CoNLL-U file: its sentences' `# text`, joined by a space.

    A `# newdoc` comment starts a document (a file with none is one document). A sentence without
    `# text` is rebuilt from its tokens and SpaceAfter=No. Runs of whitespace become one space, so
    a tokenizer meets no whitespace tokens, whose FORM would not match the gold text.
    """
    documents: List[List[str]] = [[]]
    text: Optional[str] = None
    tokens: List[str] = []
    word_end = 0
    for line in lines:
        line = line.rstrip("\r\n")
        if line.startswith("#"):
            key, _, value = line[1:].partition("=")
            if key.split()[:1] == ["newdoc"] and documents[-1]:
                documents.append([])
            elif key.strip() == "text":
                text = value.strip()
        elif line.strip():
            columns = line.split("\t")
            if "." in columns[0] or len(columns) < 10:
                continue
            first, _, last = columns[0].partition("-")
            if int(first) <= word_end:
                continue  # a word inside a multiword token
            word_end = int(last or first)
            space = "" if "SpaceAfter=No" in columns[9].split("|") else " "
            tokens.append(columns[1] + space)
        elif tokens:
            documents[-1].append(text if text is not None else "".join(tokens))
            text, tokens, word_end = None, [], 0
    if tokens:
        documents[-1].append(text if text is not None else "".join(tokens))
    return [" ".join(" ".join(sentences).split()) for sentences in documents if sentences]


def write_results(scores: Dict[str, Score], gold_path, system_path, output) -> None:
    from ..provenance import provenance

    result = {"gold": str(gold_path), "system": str(system_path), "metrics": scores_dict(scores)}
    result["provenance"] = provenance()
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf8")
