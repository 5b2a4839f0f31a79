"""Tokenisation alone, scored the CoNLL 2018 way, without a trained model.

`python -m spacy_pairatt ud-tokenize TOKENIZER TEXT` runs only a tokenizer (spaCy's for a language,
or the one a config names) and spaCy's rule-based sentencizer over raw text (one document a line,
as `ud-text` writes it) and writes CoNLL-U through the `parse` writer, multiword token lines
included; `ud-eval` then gives its Tokens, Words and Sentences F1. Each sentence gets a placeholder
tree (every word under its first) so that the file is valid CoNLL-U: the other metrics mean nothing.

`python -m spacy_pairatt tokenizer-eval` scores spaCy's stock English tokenizer and the UD English
one (components/tokenizer.py) on EWT train and dev in-process through the same writer and `ud_eval`, with each
rule's effect (the tokenizer without it) and the disagreements with the gold tokens that remain,
ranked, into results/tokenizer_ewt.{json,md}.
"""

import io
import re
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import spacy
from spacy.attrs import DEP, HEAD, SENT_START
from spacy.language import Language
from spacy.tokens import Doc

from ..components.tokenizer import RULES, ud_english_tokenizer
from ..corpora.ud_documents import document_texts
from ..parse_files.files import OutputTarget, open_input
from ..parse_files.parsing import parse_stream
from ..reporting.json_files import write_json, write_text
from ..reporting.tables import TOKEN_METRICS, tokenizer_tables
from .ud_eval import evaluate
from .ud_treebank import Treebank, load_conllu, read_treebank

PLACEHOLDER_TREE = "pairatt_placeholder_tree"
STOCK = "blank:en"
TOP_DISAGREEMENTS = 15


@Language.component(PLACEHOLDER_TREE)
def placeholder_tree(doc: Doc) -> Doc:
    """Every token of a sentence under the sentence's first token (`dep`, the first is ROOT)."""
    if not len(doc):
        return doc
    starts = doc.to_array(SENT_START) == 1
    starts[0] = True
    index = np.arange(len(doc))
    first = np.maximum.accumulate(np.where(starts, index, 0))
    labels = np.where(first == index, doc.vocab.strings.add("ROOT"), doc.vocab.strings.add("dep"))
    doc.from_array([HEAD, DEP], np.stack([(first - index).astype("uint64"), labels.astype("uint64")], axis=1))
    return doc


def tokenizer_pipeline(source: str) -> Language:
    """`blank:LANG`: spaCy's tokenizer for LANG; a config file: a blank pipeline of its [nlp] lang and
    tokenizer, its components left out. Then spaCy's sentencizer and the placeholder tree."""
    if source.startswith("blank:"):
        nlp = spacy.blank(source[len("blank:") :])
    elif Path(source).is_file():
        settings = spacy.util.load_config(source).get("nlp", {})
        tokenizer = {"nlp": {"tokenizer": settings["tokenizer"]}} if "tokenizer" in settings else {}
        nlp = spacy.blank(settings.get("lang", "en"), config=tokenizer)
    else:
        raise ValueError(f"{source!r} is neither blank:LANG nor a config file")
    return with_sentences(nlp)


def with_sentences(nlp: Language) -> Language:
    nlp.add_pipe("sentencizer")
    nlp.add_pipe(PLACEHOLDER_TREE)
    return nlp


def tokenize_file(source: str, input_path: str, output_path: Optional[str]) -> int:
    """ud-tokenize: the documents of a text file (or stdin) as CoNLL-U; returns how many."""
    with open_input(input_path) as stream:
        nlp = tokenizer_pipeline(source)
        with OutputTarget(output_path).open() as output:
            return parse_stream(nlp, stream, output)


def tokenized_conllu(nlp: Language, texts: Sequence[str]) -> str:
    """The CoNLL-U that ud-tokenize writes for these documents."""
    output = io.StringIO()
    parse_stream(nlp, io.BytesIO("".join(text + "\n" for text in texts).encode("utf8")), output)
    return output.getvalue()


def without_multiword_lines(conllu: str) -> str:
    """The words as tokens, as `parse` wrote them before it wrote multiword token lines."""
    return "".join(line for line in conllu.splitlines(keepends=True) if not re.match(r"\d+-\d+\t", line))


def token_scores(gold: Treebank, system: Treebank) -> Dict[str, Dict]:
    scores = evaluate(gold, system)
    return {metric: scores[metric].to_dict() for metric in TOKEN_METRICS}


# --- disagreements ------------------------------------------------------------------------------------


def disagreements(gold: Treebank, system: Treebank) -> Counter:
    """(gold tokens, system tokens) of each stretch of text the two tokenize differently, counted.

    The stretches lie between the token ends both files share; one token on each side there is
    the same token. Tokens are shown joined by spaces (`don't` against `do n't`).
    """
    shared = np.intersect1d(gold.tokens[:, 1], system.tokens[:, 1])
    gold_region = np.searchsorted(shared, gold.tokens[:, 1])
    system_region = np.searchsorted(shared, system.tokens[:, 1])
    differ = np.flatnonzero(
        (np.bincount(gold_region, minlength=len(shared)) != 1)
        | (np.bincount(system_region, minlength=len(shared)) != 1)
    )

    def token_texts(treebank: Treebank, regions: np.ndarray) -> List[str]:
        bounds = np.searchsorted(regions, np.stack([differ, differ + 1]))
        spans = treebank.tokens.tolist()
        return [" ".join(treebank.text[a:b] for a, b in spans[start:end]) for start, end in bounds.T]

    return Counter(zip(token_texts(gold, gold_region), token_texts(system, system_region)))


# What a disagreement is about, tried in order on its text (the tokens joined without spaces).
DISAGREEMENT_KINDS = (
    ("URL or e-mail address", re.compile(r"https?:|www\.|\w@\w")),
    ("punctuation only", re.compile(r"^[\W_]+$")),
    ("apostrophe (contraction, possessive, quote)", re.compile(r"['’`]")),
    ("hyphen or dash", re.compile(r"[-–—]")),
    ("slash", re.compile(r"/")),
    ("brackets", re.compile(r"[()\[\]{}<>]")),
    ("word and period", re.compile(r"\w\.$")),
    ("digits and letters", re.compile(r"\d[^\W\d_]|[^\W\d_]\d")),
)


def disagreement_kind(gold_tokens: str) -> str:
    text = gold_tokens.replace(" ", "")
    return next((name for name, pattern in DISAGREEMENT_KINDS if pattern.search(text)), "other")


def ranked_disagreements(counts: Counter) -> Dict:
    """Kinds by number of disagreements, and the most frequent disagreements themselves."""
    kinds = Counter()
    for (gold_tokens, _), count in counts.items():
        kinds[disagreement_kind(gold_tokens)] += count
    return {
        "total": sum(counts.values()),
        "kinds": dict(kinds.most_common()),
        "top": [
            [gold_tokens, system_tokens, count]
            for (gold_tokens, system_tokens), count in counts.most_common(TOP_DISAGREEMENTS)
        ],
    }


# --- the evaluation --------------------------------------------------------------------------------------


class Splits:
    """Gold treebanks and their documents' raw text, by split name."""

    def __init__(self, paths: Dict[str, str]):
        self.paths = dict(paths)
        self.gold = {name: load_conllu(path) for name, path in self.paths.items()}
        self.texts = {
            name: document_texts(Path(path).read_text(encoding="utf8").splitlines()) for name, path in paths.items()
        }

    def conllu(self, nlp: Language, names: Sequence[str]) -> Dict[str, str]:
        return {name: tokenized_conllu(nlp, self.texts[name]) for name in names}

    def scores(self, conllu: Dict[str, str]) -> Dict[str, Dict[str, Dict]]:
        return {name: token_scores(self.gold[name], read_treebank(text.splitlines())) for name, text in conllu.items()}


def f1_differences(scores: Dict[str, Dict], baseline: Dict[str, Dict], metrics=("Tokens", "Words")) -> Dict:
    """scores minus baseline: F1 of each metric on each split of scores (fractions, as the scores)."""
    return {
        name: {metric: scores[name][metric]["f1"] - baseline[name][metric]["f1"] for metric in metrics}
        for name in scores
    }


def rule_pipeline(rules: Sequence[str]) -> Language:
    nlp = spacy.blank("en")
    nlp.tokenizer = ud_english_tokenizer(nlp.vocab, rules)
    return with_sentences(nlp)


def evaluate_tokenizers(paths: Dict[str, str], config: str, tuning: Sequence[str] = ("train", "dev")) -> Dict:
    """spaCy's English tokenizer (its words written as tokens, then with multiword token lines) and
    the config's on every split; on the tuning splits only (test is read once) each rule's effect
    (the UD English tokenizer with all RULES against it without that one) and the disagreements
    with the gold tokens, ranked."""
    splits = Splits(paths)
    tuned = [name for name in tuning if name in paths]
    stock = splits.conllu(tokenizer_pipeline(STOCK), list(paths))
    shipped = splits.conllu(tokenizer_pipeline(config), list(paths))
    words_as_tokens = {name: without_multiword_lines(text) for name, text in stock.items()}
    rows = [
        {"name": name, "tokenizer": source, "scores": splits.scores(conllu)}
        for name, source, conllu in (
            ("spaCy English, words as tokens", STOCK, words_as_tokens),
            ("spaCy English", STOCK, stock),
            ("UD English", config, shipped),
        )
    ]
    lines = {name: rows[1]["scores"][name] for name in tuned}
    effects = {"multiword token lines": f1_differences(lines, rows[0]["scores"])}
    all_rules = splits.scores(splits.conllu(rule_pipeline(list(RULES)), tuned))
    for rule in RULES:
        without = splits.scores(splits.conllu(rule_pipeline([other for other in RULES if other != rule]), tuned))
        effects[rule] = f1_differences(all_rules, without)
    ranked = {
        row["name"]: {
            name: ranked_disagreements(disagreements(splits.gold[name], read_treebank(conllu[name].splitlines())))
            for name in tuned
        }
        for row, conllu in ((rows[1], stock), (rows[2], shipped))
    }
    return {"gold": splits.paths, "tokenizer_config": config, "rows": rows, "effects": effects, "disagreements": ranked}


# --- reports ---------------------------------------------------------------------------------------------


def tokenizer_report(result: Dict) -> str:
    """results/tokenizer_ewt.md: the tables, and the most frequent disagreements of each tokenizer."""
    parts = [
        "# Tokenisation on UD English-EWT: spaCy's English tokenizer and the UD English one\n",
        tokenizer_tables(result),
    ]
    for name, splits in result["disagreements"].items():
        for split, ranked in splits.items():
            parts.append(f"\nMost frequent disagreements of {name} on {split} (gold tokens / system tokens, count):\n")
            parts.append("\n".join(f"- `{gold}` / `{system}`: {count}" for gold, system, count in ranked["top"]) + "\n")
    return "".join(parts)


def write_tokenizer_results(result: Dict, output_json: str, output_md: Optional[str]) -> None:
    from ..reporting.provenance import provenance

    result = {**result, "provenance": provenance()}
    write_json(output_json, result)
    if output_md:
        write_text(output_md, tokenizer_report(result))
