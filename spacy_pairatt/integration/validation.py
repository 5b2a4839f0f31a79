"""Checks of gold parses before training, so malformed data fails loudly instead of training silently.

spaCy accepts cycles, sentences without a root and heads pointing into another sentence in a Doc
(it derives sentence boundaries from the roots but does not reject the rest), and the loss would
otherwise just drop such arcs.

Also: numeric settings of the registered functions (`check_settings`), the transformer output a
component reads (`transformer_output_problem`) and the dev corpus of a training config
(`validate_dev_corpus`).
"""

import math
from numbers import Integral, Real
from pathlib import Path
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

import numpy as np
from spacy.attrs import DEP, HEAD, SENT_START
from spacy.tokens import Doc
from spacy.training import Example

from ..core.tree_checks import cycle_members

TEXT_PREVIEW = 80


class MissingAttentionError(ValueError):
    """The upstream transformer does not output attention weights."""


ATTENTION_CONFIG_HINT = (
    "Set these in the transformer's config:\n"
    "[components.transformer.model.transformer_config]\n"
    "output_attentions = true\n"
    'attn_implementation = "eager"'
)


def validate_gold_parse(
    example: Union[Example, Doc],
    index: int,
    labels: Optional[Iterable[str]] = None,
    *,
    source: str = "training data",
) -> None:
    """Raise ValueError naming the example if its reference parse is not one tree per sentence.

    Checks cycles, several roots in one sentence, heads outside the token's sentence and, when
    `labels` is given, labels not among them. Tokens without an annotated head (partial annotation)
    are skipped: they count neither as roots nor as arcs.
    index and source only name the example in the message ("example 3 of the training data").
    """
    doc = example.reference if isinstance(example, Example) else example
    if len(doc) == 0 or not doc.has_annotation("DEP"):  # spaCy says an empty Doc has every annotation
        return
    problem = gold_parse_problem(doc, labels)
    if problem:
        raise ValueError(
            f"pairatt_parser: example {index} of the {source} "
            f"({doc.text[:TEXT_PREVIEW]!r}) has an invalid gold parse: {problem}"
        )


def gold_parse_problem(doc: Doc, labels: Optional[Iterable[str]] = None) -> Optional[str]:
    """What is wrong with the Doc's annotated arcs, or None when nothing is."""
    array = doc.to_array([HEAD, DEP, SENT_START])
    deps = array[:, 1]
    positions = np.arange(len(doc))
    heads = positions + array[:, 0].astype("int64")
    annotated = deps != 0
    sentence_ids = np.cumsum(array[:, 2].astype("int64") == 1)

    if labels is not None:
        known = np.array([doc.vocab.strings[label] for label in set(labels)], dtype="uint64")
        unknown = annotated & ~np.isin(deps, known)
        if unknown.any():
            i = int(np.argmax(unknown))
            return f"label {doc[i].dep_!r} on token {i} ({doc[i].text!r}) is not one of the model's {len(known)} labels"

    outside = annotated & (sentence_ids[heads] != sentence_ids)
    if outside.any():
        i = int(np.argmax(outside))
        return f"the head of token {i} ({doc[i].text!r}) is token {heads[i]}, outside its sentence"

    roots = annotated & (heads == positions)
    roots_per_sentence = np.bincount(sentence_ids[roots], minlength=sentence_ids[-1] + 1)
    if (roots_per_sentence > 1).any():
        sentence = int(np.argmax(roots_per_sentence > 1))
        tokens = np.flatnonzero(roots & (sentence_ids == sentence)).tolist()
        return f"tokens {tokens} are all roots of the same sentence"

    on_cycle = cycle_members(np.where(annotated, heads, positions))
    if on_cycle.any():
        return f"tokens {np.flatnonzero(on_cycle).tolist()} form a cycle"
    return None


# Numeric settings of the registered functions and components: (what is allowed, test). Checked
# when the model or component is built, so a bad value fails at once with its key named instead
# of deep inside torch or at the first parse.
def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def _integer_at_least(low: int) -> Tuple[str, Callable[[Any], bool]]:
    return f"an integer >= {low}", lambda v: isinstance(v, Integral) and not isinstance(v, bool) and v >= low


SETTING_RULES = {
    "arc_width": _integer_at_least(1),
    "label_width": _integer_at_least(1),
    "hidden_width": _integer_at_least(1),
    "max_pairs_per_chunk": _integer_at_least(1),
    "surface_width": _integer_at_least(1),
    "width": _integer_at_least(1),
    "window_size": _integer_at_least(0),
    "depth": _integer_at_least(1),
    "members": _integer_at_least(1),
    "max_pairs_per_doc": _integer_at_least(2),  # two entities are two ordered pairs
    "dropout": ("a number in [0, 1)", lambda v: _is_number(v) and 0 <= v < 1),
    "grad_factor": ("a number >= 0 (0 freezes the transformer for this component)", lambda v: _is_number(v) and v >= 0),
    "threshold": ("a number in [0, 1]", lambda v: _is_number(v) and 0 <= v <= 1),
    **{
        name: ("a probability, a number in [0, 1]", lambda v: _is_number(v) and 0 <= v <= 1)
        for name in ("level", "drop_final", "lowercase_start", "space_change", "line_break")
    },
    "negative_ratio": ("null (all pairs) or a number >= 0", lambda v: v is None or (_is_number(v) and v >= 0)),
}


def check_settings(owner: str, **values: Any) -> None:
    """Raise one ValueError naming `owner` (the registered function or component) and the key of
    the first value that SETTING_RULES does not allow.

    `check_settings("spacy-pairatt.PairScorer.v1", arc_width=0)` raises
    "spacy-pairatt.PairScorer.v1: arc_width must be an integer >= 1, got 0".
    """
    for key, value in values.items():
        if key not in SETTING_RULES:
            raise KeyError(f"check_settings: no rule for the setting {key!r} of {owner}")
        allowed, is_valid = SETTING_RULES[key]
        if not is_valid(value):
            raise ValueError(f"{owner}: {key} must be {allowed}, got {value!r}")


def transformer_ran(trf_data: Any) -> bool:
    """Whether `trf_data` is the output of a transformer that ran on the Doc.

    False for None (the `Doc._.trf_data` default), for output without hidden states
    (`TransformerData.empty()`) and for the all-zero stand-in (`TransformerData.zeros`) that
    spacy-transformers' listener passes on at inference for a Doc whose `trf_data` is None.
    """
    output = getattr(trf_data, "model_output", None)
    if not output or output.get("last_hidden_state") is None:
        return False
    return not _is_listener_stand_in(trf_data)


def _is_listener_stand_in(trf_data: Any) -> bool:
    """TransformerData.zeros: only a hidden state, all zero, and wordpieces with empty strings
    (a tokenizer never gives an empty wordpiece, and real output starts with a special token)."""
    if set(trf_data.model_output.keys()) != {"last_hidden_state"}:
        return False
    strings = getattr(trf_data.wordpieces, "strings", None) or []
    if not all(piece == "" for row in strings for piece in row):
        return False
    hidden = trf_data.model_output["last_hidden_state"]
    return not bool(hidden.any())


def transformer_output_problem(trf_data: Any, use_attention: bool) -> Optional[str]:
    """Why a component cannot read the transformer output of a Doc with tokens, or None when it can.

    (a) the transformer did not run on the Doc (`transformer_ran` is False): names the causes and
    the fix; (b) it ran, `use_attention` is true and the output has no attention weights: says so
    and gives ATTENTION_CONFIG_HINT. A Doc without tokens has nothing to read: do not ask.
    """
    if not transformer_ran(trf_data):
        return (
            "Doc._.trf_data is empty: the transformer did not run on this Doc, so there are no hidden "
            "states or attention weights to read. Its component is disabled or excluded "
            "(nlp.select_pipes, spacy.load(..., disable=/exclude=)), comes after this component in "
            "nlp.pipeline, or the Doc was not passed through the pipeline (a component called on "
            "nlp.make_doc(...) alone). Run the Doc through nlp with the transformer enabled and before "
            "this component; in training, a frozen transformer must also be in "
            "[training] annotating_components."
        )
    if use_attention and not trf_data.model_output.get("attentions"):
        return (
            "Doc._.trf_data has no attention weights: the transformer ran without them (or a "
            "pairatt_release_attention component before this one dropped them).\n" + ATTENTION_CONFIG_HINT
        )
    return None


def dev_corpus_examples(nlp) -> Optional[Tuple[str, List[Example]]]:
    """(where, examples) of the dev corpus that `nlp.config`'s [training] dev_corpus names, read as
    `spacy train` reads it at each evaluation; `where` is "[corpora.dev] (path)" for messages.

    None when the config names no dev corpus that can be built (a pipeline built in code, whose
    `paths.dev` is unset or names a file that is not there): then no `spacy train` run evaluates
    on one, and `spacy train` itself builds the dev reader before it initializes the pipeline, so
    its errors come from there.
    """
    from spacy.util import resolve_dot_names

    try:
        config = nlp.config.interpolate()
        dot_name = config["training"]["dev_corpus"]
        (corpus,) = resolve_dot_names(config, [dot_name])
    except (KeyError, TypeError, ValueError):
        return None
    if not callable(corpus):
        return None
    section: Any = config
    for part in dot_name.split("."):
        section = section.get(part, {}) if isinstance(section, dict) else {}
    path = section.get("path") if isinstance(section, dict) else None
    if path and not Path(path).exists():
        return None  # a config's default path in a checkout without the corpus: nothing to check
    where = f"[{dot_name}]" + (f" ({path})" if path else "")
    return where, list(corpus(nlp))


def validate_dev_corpus(
    nlp, owner: str, check_example: Optional[Callable[[Example, int, str], None]] = None
) -> Optional[Tuple[str, List[Example]]]:
    """Check the dev corpus of the training config like the training corpus, before training starts.

    An empty dev corpus is an error (spaCy would evaluate on nothing and report 0.00 at every
    step); `check_example(example, index, source)` raises for a malformed example, `source`
    naming the corpus. Returns `dev_corpus_examples(nlp)`: None when there is no dev corpus to
    check. Call it from a component's `initialize(..., nlp=nlp)`.
    """
    found = dev_corpus_examples(nlp)
    if found is None:
        return None
    where, examples = found
    if not examples:
        raise ValueError(
            f"{owner}: the dev corpus {where} has no examples, so every evaluation during training "
            f"would score 0.00. Point paths.dev (or [training] dev_corpus) at a non-empty corpus."
        )
    if check_example is not None:
        for index, example in enumerate(examples):
            check_example(example, index, f"dev corpus {where}")
    return found


def validate_parser_dev_corpus(nlp, owner: str = "pairatt_parser") -> None:
    """`validate_dev_corpus` for a parser: a dev corpus without heads is an error, and every gold
    parse must be one tree per sentence (labels unseen in training are allowed: they only score
    as errors)."""
    found = validate_dev_corpus(
        nlp, owner, lambda example, index, source: validate_gold_parse(example, index, source=source)
    )
    if found is not None and not any(example.reference.has_annotation("DEP") for example in found[1]):
        where = found[0]
        raise ValueError(
            f"{owner}: no example of the dev corpus {where} has gold heads and labels, so every "
            f"evaluation would score 0.00; it needs data with dependency annotation (e.g. CoNLL-U "
            f"converted with `spacy convert`)"
        )
