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

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..reporting.json_files import write_json
from .ud_treebank import NO_HEAD, Treebank, UDEvalError, load_conllu

METRICS = (
    "Tokens", "Sentences", "Words", "UPOS", "XPOS", "UFeats", "AllTags", "Lemmas", "UAS", "LAS", "CLAS", "MLAS", "BLEX",
)  # fmt: skip
NOT_ALIGNED = -2  # a system word's gold partner when it has none (-1 stays the root)


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
    # the system head of each pair, as a gold word (-1: the root, NOT_ALIGNED: none or no syntax)
    system_heads = system.heads[s]
    system_head_as_gold = np.where(system_heads < 0, -1, gold_of[np.maximum(system_heads, 0)])
    system_head_as_gold[system_heads == NO_HEAD] = NOT_ALIGNED

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


def f1_percent(result: Dict, metric: str) -> float:
    """A metric's F1 in percent from `ud-eval --output` JSON (`scores_dict` under "metrics")."""
    return 100 * result["metrics"][metric]["f1"]


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


def ud_results_table(rows: List[Tuple[str, Dict]], metrics: Sequence[str]) -> str:
    """Markdown: a row per (name, `ud-eval --output` result) with each metric's F1 in percent, the
    gold file and the commit the scores were made at."""
    unknown = [metric for metric in metrics if metric not in METRICS]
    if unknown:
        raise ValueError(f"no metric {', '.join(unknown)}; ud-eval's are {', '.join(METRICS)}")
    lines = [
        "| system | gold | " + " | ".join(f"{metric} F1" for metric in metrics) + " | commit |",
        "|---|---|" + "---|" * len(metrics) + "---|",
    ]
    for name, result in rows:
        figures = " | ".join(f"{f1_percent(result, metric):.2f}" for metric in metrics)
        commit = (result.get("provenance", {}).get("code", {}).get("commit") or "?")[:7]
        lines.append(f"| {name} | `{Path(result['gold']).name}` | {figures} | {commit} |")
    return "\n".join(lines) + "\n"


def write_results(scores: Dict[str, Score], gold_path, system_path, output, errors: Optional[Dict] = None) -> None:
    """The scores as JSON with their provenance; `errors`, where given, is ud_errors.error_analysis's."""
    from ..reporting.provenance import provenance

    result = {"gold": str(gold_path), "system": str(system_path), "metrics": scores_dict(scores)}
    if errors is not None:
        result["errors"] = errors
    result["provenance"] = provenance()
    write_json(output, result, sort_keys=True)
