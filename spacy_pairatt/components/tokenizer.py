"""English tokenisation as UD English-EWT does it (docs/ud_pipeline.md#tokenisation).

Two parts. `multiword_tokens` says which spaCy tokens written together UD makes one token of
several words (`don't` = `do` + `n't`, `company's` = `company` + `'s`), so that the CoNLL-U writer
can give them a multiword token line. `ud_english_tokenizer` is spaCy's English tokenizer with the
rules of `RULES`, each a change where spaCy splits text differently from EWT's annotation, read off
EWT train and kept only where it raised both Tokens and Words F1 on train and on dev (`python -m
spacy_pairatt tokenizer-eval`, results/tokenizer_ewt.md).
"""

import re
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
from spacy.lang.char_classes import ALPHA, HYPHENS
from spacy.lang.en import English
from spacy.symbols import ORTH
from spacy.tokenizer import Tokenizer
from spacy.tokens import Span
from spacy.util import compile_infix_regex, compile_prefix_regex, compile_suffix_regex, registry
from spacy.vocab import Vocab

# The words UD English writes inside a multiword token after its first word, as spaCy's tokenizer
# splits them off (its exceptions and its 's suffix), lowercased, with ’ and ` read as '.
# Checked on EWT 2.16 train: every multiword token there is a word followed by these, or a plural's
# possessive apostrophe (`parents'`).
CLITICS = frozenset("n't nt 's s 'm m 're re 've ve 'll ll 'd d na ta not".split())
APOSTROPHE_CHARS = "'’`"
APOSTROPHES = str.maketrans("’`", "''")


def attaches(previous: str, text: str, in_quote: bool) -> bool:
    """Whether `text`, written right after `previous`, is a clitic of its word: in CLITICS, or a plural's
    possessive apostrophe (after an s, where it does not close a quote)."""
    return text.lower() in CLITICS or (text == "'" and previous[-1] in "sS" and not in_quote)


def multiword_tokens(tokens: Span) -> List[range]:
    """The token index ranges (relative to the span, two tokens or more) to write as one UD
    multiword token; none outside English, whose clitics these are.

    A run is a host token that contains a letter followed, with no space between, by one clitic
    or more (`do n't`, `I 'm`, `gon na`, `Bush 's`, `parents '`). An apostrophe token that is not a
    possessive opens or closes a quote.
    """
    if tokens.doc.lang_ != "en":
        return []
    texts = [token.text.translate(APOSTROPHES) for token in tokens]
    runs: List[range] = []
    in_quote = False
    i = 0
    while i < len(texts):
        end = i + 1
        if any(char.isalpha() for char in texts[i]):
            while (
                end < len(texts) and not tokens[end - 1].whitespace_ and attaches(texts[end - 1], texts[end], in_quote)
            ):
                end += 1
        if end - i > 1:
            runs.append(range(i, end))
        elif texts[i] == "'":
            in_quote = not in_quote
        i = end
    return runs


@dataclass
class TokenizerRules:
    """What a spaCy Tokenizer is built from: affix patterns (tried in order), special cases, and
    patterns of whole tokens never split (token_match)."""

    prefixes: List[str]
    suffixes: List[str]
    infixes: List[str]
    special_cases: Dict[str, List[Dict[int, str]]]
    whole_tokens: List[str] = field(default_factory=list)


def replaced(entries: List[str], old: Sequence[str], new: Callable[[str], str]) -> List[str]:
    """entries with each of `old` replaced by new(entry); every one of `old` must be there (spaCy's
    English rules as this module was written against)."""
    missing = [entry for entry in old if entry not in entries]
    if missing:
        raise ValueError(f"spaCy's English tokenizer rules lack {missing}: this spaCy is not the one checked")
    return [new(entry) if entry in old else entry for entry in entries]


def english_rules() -> TokenizerRules:
    """spaCy's own English rules, as `spacy.blank("en")` tokenizes."""
    defaults = English.Defaults
    return TokenizerRules(
        list(defaults.prefixes), list(defaults.suffixes), list(defaults.infixes), dict(defaults.tokenizer_exceptions)
    )


# A run of one punctuation character (`!!!`, `<<`, `____`), and a run of ! and ? with at most one
# period at an end (`?!`, `.?`, `!!!.`) that is no ellipsis's end: EWT keeps each as one token.
PUNCTUATION_RUN = r"(?P<{name}>[^\w\s]|_)(?P={name})+"
EXCLAMATION_RUN = r"(?<!\.)(?:\.[!?]+|[!?]+\.|[!?]*(?:\?!|!\?)[!?]*)"


def punctuation_runs(rules: TokenizerRules) -> TokenizerRules:
    """`wow!!!` is `wow` `!!!`, not three `!`."""
    return replace(
        rules,
        prefixes=[PUNCTUATION_RUN.format(name="prefix_run"), EXCLAMATION_RUN, *rules.prefixes],
        suffixes=[PUNCTUATION_RUN.format(name="suffix_run"), EXCLAMATION_RUN, *rules.suffixes],
        infixes=[PUNCTUATION_RUN.format(name="infix_run"), *rules.infixes],
    )


# The words before a hyphen that EWT keeps in one token with the rest (`e-mail`, `non-profit`,
# `re-read`, `mid-August`, `mid-1980s`), where it splits other hyphenated words (`well - being`):
# English prefixes, each kept more often than split on EWT train.
HYPHEN_PREFIXES = "e non pre anti mid re post co over pro multi ex sub semi cross neo".split()
NOT_AFTER_PREFIX = "".join(rf"(?<!\b(?i:{prefix}))" for prefix in HYPHEN_PREFIXES)
SPACY_HYPHEN_INFIX = r"(?<=[{a}0-9])(?:{h})(?=[{a}])".format(a=ALPHA, h=HYPHENS)


def hyphenated_prefixes(rules: TokenizerRules) -> TokenizerRules:
    """spaCy's hyphen infix, except after a word of HYPHEN_PREFIXES."""
    infix = r"(?<=[{a}0-9]){p}(?:{h})(?=[{a}])".format(a=ALPHA, p=NOT_AFTER_PREFIX, h=HYPHENS)
    return replace(rules, infixes=replaced(rules.infixes, [SPACY_HYPHEN_INFIX], lambda entry: infix))


def hyphen_before_digits(rules: TokenizerRules) -> TokenizerRules:
    """A hyphen between a letter and a digit splits too (`F - 16`, `AK - 47`), after no prefix
    of HYPHEN_PREFIXES (`mid-2004`); spaCy keeps `F-16`."""
    infix = r"(?<=[{a}]){p}(?:{h})(?=[0-9])".format(a=ALPHA, p=NOT_AFTER_PREFIX, h=HYPHENS)
    return replace(rules, infixes=[*rules.infixes, infix])


# A hyphen at a word's start before a letter or digit (`-for`, `-5`): a token of its own in EWT.
LEADING_HYPHEN = r"-(?=[{a}0-9])".format(a=ALPHA)


def leading_hyphen(rules: TokenizerRules) -> TokenizerRules:
    return replace(rules, prefixes=[*rules.prefixes, LEADING_HYPHEN])


# North American telephone numbers and extensions (`713-853-3989`, `1-800-991-9019`, `345-9945`,
# `x3-9890`): one token in EWT, where spaCy splits at every hyphen between digits (as EWT does in
# ranges: `5 - 10`).
PHONE_NUMBER = r"(?:1-)?(?:[0-9]{3}-)?[0-9]{3}-[0-9]{4}|x?[0-9]-[0-9]{4}"


def phone_numbers(rules: TokenizerRules) -> TokenizerRules:
    return replace(rules, whole_tokens=[*rules.whole_tokens, PHONE_NUMBER])


# Two single letters around a slash (`b/c`, `l/c`, `I/S`): kept whole in EWT more often than split.
LETTER_SLASH_LETTER = r"[A-Za-z]/[A-Za-z]"


def letter_slash_letter(rules: TokenizerRules) -> TokenizerRules:
    return replace(rules, whole_tokens=[*rules.whole_tokens, LETTER_SLASH_LETTER])


# A clock time's AM/PM and thousands' k after digits (`7:30PM`, `65k`): separate tokens in EWT;
# spaCy splits them only from the hours it lists (`7pm`).
TIME_AND_THOUSANDS = r"(?<=[0-9])(?:[ap]m|[AP]M|k)"


def times_and_thousands(rules: TokenizerRules) -> TokenizerRules:
    return replace(rules, suffixes=[*rules.suffixes, TIME_AND_THOUSANDS])


# An opening bracket after a letter or a closing bracket, a closing one before a letter or an
# opening bracket (`account(s)`, `USD[38,000`, `pdf)(See`): EWT splits them; spaCy only at a
# word's ends.
BRACKETS_IN_WORDS = [
    r"(?<=[{a})\]])[(\[](?=[{a}0-9])".format(a=ALPHA),
    r"(?<=[{a}0-9])[)\]](?=[{a}(\[])".format(a=ALPHA),
]


def brackets_in_words(rules: TokenizerRules) -> TokenizerRules:
    return replace(rules, infixes=[*rules.infixes, *BRACKETS_IN_WORDS])


# Single tokens spaCy splits and EWT train keeps whole more often than not: abbreviations with
# their period (days of the week, titles, Ft. for Fort, No. for number, Attn.), and Yahoo!.
ADDED_SPECIAL_CASES = (
    "Mon. Tue. Tues. Wed. Thu. Thur. Thurs. Fri. Sat. Sun. Lt. Col. Capt. Sgt. Reps. Ft. No. Attn. Yahoo!".split()
)


def added_special_cases(rules: TokenizerRules) -> TokenizerRules:
    added = {text: [{ORTH: text}] for text in ADDED_SPECIAL_CASES}
    return replace(rules, special_cases={**rules.special_cases, **added})


# spaCy special cases EWT train tokenizes otherwise: it splits `and / or`, and `):` closes a
# bracket before a colon far more often than it is a face.
DROPPED_SPECIAL_CASES = ("and/or", "):")


def dropped_special_cases(rules: TokenizerRules) -> TokenizerRules:
    kept = {text: case for text, case in rules.special_cases.items() if text not in DROPPED_SPECIAL_CASES}
    return replace(rules, special_cases=kept)


# spaCy's suffix 's, except after a digit (`1590's`, `60's`: one word, a plural, in EWT).
SPACY_S_SUFFIXES = ("'s", "'S", "’s", "’S")


def numeral_plurals(rules: TokenizerRules) -> TokenizerRules:
    return replace(rules, suffixes=replaced(rules.suffixes, SPACY_S_SUFFIXES, lambda entry: rf"(?<![0-9]){entry}"))


# What spaCy splits after `you` (`you'd've` = `you` `'d` `'ve`), which it does not after `y'all`.
YALL_CLITICS = ("'d", "'ve", "'d've", "'ll", "'re")


def yall_clitics(rules: TokenizerRules) -> TokenizerRules:
    """`y'all'd've` is `y'` `all` `'d` `'ve`: spaCy's pieces of `y'all`, then those of `you'd've` after `you`."""
    added = {}
    for apostrophe in "'’":
        host = rules.special_cases[f"y{apostrophe}all"]
        for clitics in YALL_CLITICS:
            clitics = clitics.replace("'", apostrophe)
            added[f"y{apostrophe}all{clitics}"] = host + rules.special_cases[f"you{clitics}"][1:]
    return replace(rules, special_cases={**rules.special_cases, **added})


def cased_special_cases(rules: TokenizerRules) -> TokenizerRules:
    """`DON'T`, `GONNA` and `Y'ALL'D'VE` split as `don't`, `gonna` and `y'all'd've` do: the
    upper-case and title-case forms of every lower-case special case that spaCy does not list, where
    it has an apostrophe or ends in `na`/`ta` (`gonna`, `gotta`); an apostrophe-less one in capitals
    is more often a word (`ID`, `ILL`: not `I` `D`, `I` `LL` on EWT dev)."""
    added = {}
    for text, pieces in rules.special_cases.items():
        if text != text.lower() or not (set(text) & set(APOSTROPHE_CHARS) or pieces[-1][ORTH] in ("na", "ta")):
            continue
        for variant in (text.upper(), text[:1].upper() + text[1:]):
            if variant in rules.special_cases or len(variant) != len(text):
                continue
            offsets = np.cumsum([0] + [len(piece[ORTH]) for piece in pieces])
            added[variant] = [
                {**piece, ORTH: variant[start:end]} for piece, start, end in zip(pieces, offsets[:-1], offsets[1:])
            ]
    return replace(rules, special_cases={**rules.special_cases, **added})


RULES: Dict[str, Callable[[TokenizerRules], TokenizerRules]] = {
    "punctuation_runs": punctuation_runs,
    "hyphenated_prefixes": hyphenated_prefixes,
    "hyphen_before_digits": hyphen_before_digits,
    "leading_hyphen": leading_hyphen,
    "phone_numbers": phone_numbers,
    "letter_slash_letter": letter_slash_letter,
    "times_and_thousands": times_and_thousands,
    "brackets_in_words": brackets_in_words,
    "added_special_cases": added_special_cases,
    "dropped_special_cases": dropped_special_cases,
    "numeral_plurals": numeral_plurals,
    "yall_clitics": yall_clitics,
    "cased_special_cases": cased_special_cases,
}


def build_tokenizer(vocab: Vocab, rules: TokenizerRules) -> Tokenizer:
    """A spaCy Tokenizer of these rules and spaCy's English URL pattern: regular expressions and
    special cases only, so a saved pipeline keeps them (Tokenizer.to_disk)."""
    whole_tokens = "|".join(f"(?:{pattern})$" for pattern in rules.whole_tokens)
    return Tokenizer(
        vocab,
        rules=rules.special_cases,
        prefix_search=compile_prefix_regex(rules.prefixes).search,
        suffix_search=compile_suffix_regex(rules.suffixes).search,
        infix_finditer=compile_infix_regex(rules.infixes).finditer,
        token_match=re.compile(whole_tokens).match if whole_tokens else None,
        url_match=English.Defaults.url_match,
    )


def ud_english_tokenizer(vocab: Vocab, rule_names: Optional[Sequence[str]] = None) -> Tokenizer:
    """spaCy's English tokenizer with RULES (all of them, or those named, in RULES' order)."""
    names = list(RULES) if rule_names is None else list(rule_names)
    unknown = sorted(set(names) - set(RULES))
    if unknown:
        raise ValueError(f"unknown tokenizer rules {unknown}; the rules are {list(RULES)}")
    rules = english_rules()
    for name in RULES:
        if name in names:
            rules = RULES[name](rules)
    return build_tokenizer(vocab, rules)


@registry.tokenizers("spacy-pairatt.ud_english_tokenizer.v1")
def make_ud_english_tokenizer() -> Callable:
    """`spacy-pairatt.ud_english_tokenizer.v1`: [nlp.tokenizer] of configs/pipeline_minilm.cfg."""

    def create(nlp) -> Tokenizer:
        return ud_english_tokenizer(nlp.vocab)

    return create
