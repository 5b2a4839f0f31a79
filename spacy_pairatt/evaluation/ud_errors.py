"""Where a UD parse's lemmas and sentences go wrong (`ud-eval --errors`): counts by kind, commonest cases.

Lemma errors, over the aligned word pairs that ud-eval's Lemmas metric scores wrong:
- "case": the lemmas differ in case only ("The" -> "The" for "the"): an uncased encoder cannot tell;
- "form_kept": the system lemma is the word's form (the lemmatizer found no edit, or backed off);
- "other": any other edit (a wrong suffix rule, a suppletive lemma missed).

Sentence boundaries, as character offsets of the text ud-eval compares (spaces removed), the end of
the text excluded: "missed" are gold boundaries the system lacks, "false" system boundaries gold
lacks; each with the gold words on both sides and how many of them start a capitalised word.
"""

from collections import Counter
from typing import Dict, List

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


def boundary_errors(gold: Treebank, system: Treebank, top: int = 20) -> Dict:
    """Missed and false sentence boundaries, each with its commonest (word before, word after) pairs."""
    gold_ends, system_ends = (np.unique(bank.sentences[:, 1]) for bank in (gold, system))
    text_end = len(gold.text)
    word_starts = gold.spans[:, 0]

    def described(offsets: np.ndarray) -> Dict:
        offsets = offsets[offsets < text_end]
        after = np.minimum(np.searchsorted(word_starts, offsets, side="left"), len(gold) - 1)
        before = np.maximum(after - 1, 0)
        capitalised = sum(gold.forms[i][:1].isupper() for i in after)
        pairs = Counter(zip(gold.forms[before].tolist(), gold.forms[after].tolist()))
        return {
            "count": int(len(offsets)),
            "next_word_capitalised": int(capitalised),
            "commonest": [{"before": b, "after": a, "count": n} for (b, a), n in pairs.most_common(top)],
        }

    return {
        "gold": int((gold_ends < text_end).sum()),
        "system": int((system_ends < text_end).sum()),
        "missed": described(np.setdiff1d(gold_ends, system_ends)),
        "false": described(np.setdiff1d(system_ends, gold_ends)),
    }


def error_analysis(gold: Treebank, system: Treebank, top: int = 20) -> Dict[str, Dict]:
    check_same_text(gold, system)
    return {"lemmas": lemma_errors(gold, system, top), "sentence_boundaries": boundary_errors(gold, system, top)}


def errors_summary(errors: Dict[str, Dict]) -> List[str]:
    """A few lines for the terminal."""
    lemmas, bounds = errors["lemmas"], errors["sentence_boundaries"]
    kinds = ", ".join(f"{kind} {count}" for kind, count in lemmas["kinds"].items())
    return [
        f"Wrong lemmas: {lemmas['wrong']} ({kinds})",
        f"Sentence boundaries: gold {bounds['gold']}, system {bounds['system']}, missed {bounds['missed']['count']} "
        f"({bounds['missed']['next_word_capitalised']} before a capital), false {bounds['false']['count']}",
    ]
