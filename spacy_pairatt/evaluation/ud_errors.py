"""Where a UD parse's lemmas and sentences go wrong (`ud-eval --errors`): counts by kind, commonest cases.

Lemma errors, over the aligned word pairs that ud-eval's Lemmas metric scores wrong:
- "case": the lemmas differ in case only ("The" -> "The" for "the"): an uncased encoder cannot tell;
- "form_kept": the system lemma is the word's form (the lemmatizer found no edit, or backed off);
- "other": any other edit (a wrong suffix rule, a suppletive lemma missed).

Sentence boundaries, as character offsets of the text ud-eval compares (spaces removed), the end of
the text excluded: "missed" are gold boundaries the system lacks, "false" system boundaries gold
lacks; each with the gold words on both sides, how many of them start a capitalised word, and each
boundary's kind (BOUNDARY_KINDS, the first that fits) with a few examples.
"""

import re
from collections import Counter
from typing import Dict, List, Optional, Sequence

import numpy as np

from .ud_eval import align_words, check_same_text
from .ud_treebank import Treebank


def lemma_errors(gold: Treebank, system: Treebank, top: int = 20) -> Dict:
    """Wrong lemmas of aligned words by kind, and the `top` commonest (form, gold, system, gold UPOS)."""
    g, s = align_words(gold, system)
    gold_lemmas, system_lemmas = gold.lemmas[g], system.lemmas[s]
    scored = gold_lemmas != "_"
    wrong = scored & (gold_lemmas != system_lemmas)
    g, s = g[wrong], s[wrong]
    gold_lemmas, system_lemmas = gold_lemmas[wrong], system_lemmas[wrong]
    case = np.array([a.lower() == b.lower() for a, b in zip(gold_lemmas, system_lemmas)], dtype=bool)
    form_kept = ~case & (system_lemmas == system.forms[s])
    cases = Counter(zip(gold.forms[g].tolist(), gold_lemmas.tolist(), system_lemmas.tolist(), gold.upos[g].tolist()))
    return {
        "scored": int(scored.sum()),
        "wrong": int(len(g)),
        "kinds": {"case": int(case.sum()), "form_kept": int(form_kept.sum()), "other": int((~case & ~form_kept).sum())},
        "commonest": [
            {"form": form, "gold": lemma, "system": guess, "upos": upos, "count": count}
            for (form, lemma, guess, upos), count in cases.most_common(top)
        ],
    }


# What a boundary is next to, in the order they are tried (the first that fits is its kind).
BOUNDARY_KINDS = (
    "paragraph_edge",  # gold starts a paragraph here (raw text shows it as a line break)
    "emoticon_or_url",  # an emoticon, a URL or an e-mail address on either side
    "quote_or_bracket",  # a quote or bracket on either side
    "abbreviation",  # the word before is an abbreviation with its full stop (Mr., U.S., etc.)
    "list_or_heading",  # a list marker after, or a colon or dash before
    "no_final_punctuation",  # the word before is not . ! ? or an ellipsis
    "other",  # after final punctuation, none of the above
)
EMOTICON_OR_URL = re.compile(
    r"^(?:[:;=8xX][-o^']?[()\[\]DPpO/\\|*3$]+|[()\[\]][-o^']?[:;=]|<3|\^_*\^|https?:.*|www\..*|\S+@\S+\.\S+|\S+\.(?:com|org|net|edu|gov)(?:/\S*)?)$"
)
QUOTES_AND_BRACKETS = frozenset("\"'`()[]{}<>\u201c\u201d\u2018\u2019\u00ab\u00bb") | {"``", "''"}
ABBREVIATION = re.compile(r"^(?:[A-Za-z]\.){2,}$|^[A-Z]?[a-z]{1,4}\.$|^[A-Z]\.$")
LIST_MARKER = re.compile(r"^(?:[-*\u2022#>+]+|\(?\d{1,2}[.)]|\(?[a-zA-Z][.)])$")
HEADING_END = frozenset({":", "-", "--", "---"})
FINAL_PUNCTUATION = re.compile(r"^(?:[.!?]+|\.\.\.|\u2026)$")
EXAMPLES_PER_KIND = 3
EXAMPLE_WORDS = 6


def boundary_kind(before: str, after: str, paragraph_edge: bool) -> str:
    """The kind of a sentence boundary (BOUNDARY_KINDS) between the gold words `before` and `after`."""
    if paragraph_edge:
        return "paragraph_edge"
    if EMOTICON_OR_URL.match(before) or EMOTICON_OR_URL.match(after):
        return "emoticon_or_url"
    if before in QUOTES_AND_BRACKETS or after in QUOTES_AND_BRACKETS:
        return "quote_or_bracket"
    if ABBREVIATION.match(before):
        return "abbreviation"
    if LIST_MARKER.match(after) or before in HEADING_END:
        return "list_or_heading"
    if not FINAL_PUNCTUATION.match(before):
        return "no_final_punctuation"
    return "other"


def boundary_errors(
    gold: Treebank, system: Treebank, top: int = 20, paragraph_starts: Optional[Sequence[int]] = None
) -> Dict:
    """Missed and false sentence boundaries, each with its commonest (word before, word after) pairs
    and its counts by kind with examples. paragraph_starts: the gold sentences (indices) that
    start a paragraph, from the gold file's `# newpar` and `# newdoc` (none known: no paragraph_edge)."""
    gold_ends, system_ends = (np.unique(bank.sentences[:, 1]) for bank in (gold, system))
    text_end = len(gold.text)
    word_starts = gold.spans[:, 0]
    starts = np.asarray(paragraph_starts if paragraph_starts is not None else [], dtype=np.int64)
    paragraph_offsets = gold.sentences[starts, 0] if len(starts) else np.zeros(0, dtype=np.int64)

    def described(offsets: np.ndarray) -> Dict:
        offsets = offsets[offsets < text_end]
        after = np.minimum(np.searchsorted(word_starts, offsets, side="left"), len(gold) - 1)
        before = np.maximum(after - 1, 0)
        capitalised = sum(gold.forms[i][:1].isupper() for i in after)
        pairs = Counter(zip(gold.forms[before].tolist(), gold.forms[after].tolist()))
        at_paragraph = np.isin(offsets, paragraph_offsets)
        kinds: Dict[str, Dict] = {kind: {"count": 0, "examples": []} for kind in BOUNDARY_KINDS}
        for b, a, edge in zip(before.tolist(), after.tolist(), at_paragraph.tolist()):
            kind = kinds[boundary_kind(gold.forms[b], gold.forms[a], edge)]
            kind["count"] += 1
            if len(kind["examples"]) < EXAMPLES_PER_KIND:
                left = " ".join(gold.forms[max(a - EXAMPLE_WORDS, 0) : a])
                kind["examples"].append(f"{left} | {' '.join(gold.forms[a : a + EXAMPLE_WORDS])}")
        return {
            "count": int(len(offsets)),
            "next_word_capitalised": int(capitalised),
            "kinds": kinds,
            "commonest": [{"before": b, "after": a, "count": n} for (b, a), n in pairs.most_common(top)],
        }

    return {
        "gold": int((gold_ends < text_end).sum()),
        "system": int((system_ends < text_end).sum()),
        "missed": described(np.setdiff1d(gold_ends, system_ends)),
        "false": described(np.setdiff1d(system_ends, gold_ends)),
    }


def error_analysis(
    gold: Treebank, system: Treebank, top: int = 20, paragraph_starts: Optional[Sequence[int]] = None
) -> Dict[str, Dict]:
    check_same_text(gold, system)
    return {
        "lemmas": lemma_errors(gold, system, top),
        "sentence_boundaries": boundary_errors(gold, system, top, paragraph_starts),
    }


def sentence_errors_markdown(errors: Dict[str, Dict], title: str) -> str:
    """The sentence boundary errors by kind as markdown: a table of counts, then examples."""
    bounds = errors["sentence_boundaries"]
    lines = [
        title,
        "",
        f"Gold boundaries {bounds['gold']}, system {bounds['system']}: missed {bounds['missed']['count']}, "
        f"false {bounds['false']['count']} (the end of the text is not counted). Each error has the first kind "
        "that fits, in this order; an example is the gold words before and after it (|).",
        "",
        "| kind | missed | false |",
        "|---|---|---|",
    ]
    for kind in BOUNDARY_KINDS:
        lines.append(
            f"| {kind} | {bounds['missed']['kinds'][kind]['count']} | {bounds['false']['kinds'][kind]['count']} |"
        )
    for side in ("missed", "false"):
        lines += ["", f"## {side.capitalize()} boundaries", ""]
        for kind in BOUNDARY_KINDS:
            for example in bounds[side]["kinds"][kind]["examples"]:
                lines.append(f"- {kind}: `{example.replace('`', chr(39))}`")
    return "\n".join(lines) + "\n"


def errors_summary(errors: Dict[str, Dict]) -> List[str]:
    """A few lines for the terminal."""
    lemmas, bounds = errors["lemmas"], errors["sentence_boundaries"]
    kinds = ", ".join(f"{kind} {count}" for kind, count in lemmas["kinds"].items())
    return [
        f"Wrong lemmas: {lemmas['wrong']} ({kinds})",
        f"Sentence boundaries: gold {bounds['gold']}, system {bounds['system']}, missed {bounds['missed']['count']} "
        f"({bounds['missed']['next_word_capitalised']} before a capital), false {bounds['false']['count']}",
    ]
