"""Evaluate any spaCy parsing pipeline on a .spacy corpus with the same metrics, and tabulate.

Used for pairatt_parser and for spaCy's transition parser alike, so their figures compare.
"""

import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import spacy
from spacy.training import Corpus, Example

from ..components.attention_release import AttentionRelease
from ..core.decoding import DECODERS
from ..integration.scoring import arc_counts, score_parse
from ..packaging.shipped_pipeline import put_senter
from ..reporting.provenance import model_provenance, provenance

SENTENCE_SOURCES = ("pipeline", "gold", "sentencizer", "a path to a pipeline with a senter")


def evaluate_pipeline(
    model: str, data: str, sentences: str = "pipeline", batch_size: int = 64, decoder: Optional[str] = None,
    per_document: bool = False, without: Sequence[str] = (),
) -> Dict:  # fmt: skip
    """Parse the corpus's texts with `model` and score them against it.

    sentences: "pipeline" leaves segmentation to the pipeline (one tree per Doc when it has no
    segmenter), "gold" copies the gold sentence starts onto the Docs first, "sentencizer" puts
    spaCy's rule-based sentencizer in front of the pipeline, and a path puts the `senter` of the
    pipeline saved there in place of the pipeline's own senter where it has one, else after the
    transformer it listens to, else in front (`put_senter`). decoder
    ("mst" or "greedy") replaces the saved decoder of every pairatt_parser, so one trained model is
    scored with and without MST. per_document adds each document's arc counts (`arc_counts`), which
    paired bootstrap tests between two models need.
    without: components removed before parsing, to time a pipeline with and without them on the same
    weights and machine (the UD pipeline's cost over its parser).
    """
    started = time.time()
    check_corpus(data)
    nlp = spacy.load(model)
    unknown = [name for name in without if name not in nlp.pipe_names]
    if unknown:
        raise ValueError(
            f"no component {', '.join(map(repr, unknown))} to leave out; the pipeline has {nlp.pipe_names}"
        )
    for name in without:
        nlp.remove_pipe(name)
    if decoder is not None:
        set_decoder(nlp, decoder)
    if sentences == "sentencizer":
        put_first(nlp, "sentencizer")
    elif sentences not in ("pipeline", "gold"):
        if not Path(sentences).exists():
            raise ValueError(f"sentences must be one of {SENTENCE_SOURCES}, got {sentences!r}")
        put_senter(nlp, spacy.load(sentences), sentences)
    examples = list(Corpus(data)(nlp))
    if not examples:
        raise ValueError(f"{data} holds no documents")
    if sentences == "gold":
        for example in examples:
            copy_gold_sentence_starts(example)
    n_words = sum(len(eg.predicted) for eg in examples)
    seconds = predict_examples(nlp, examples, batch_size)
    result = {
        "model": str(model),
        "data": str(data),
        "sentences": sentences,
        "decoders": parser_decoders(nlp),
        "pipeline": nlp.pipe_names,
        "n_docs": len(examples),
        "n_words": n_words,
        "seconds": seconds,  # exact: rounded once, where a table prints it
        "words_per_second": n_words / seconds,
        "scores": score_parse(examples),
    }
    if per_document:
        result["arc_counts"] = arc_counts(examples)
    result["model_config"] = model_provenance(nlp, model)
    result["provenance"] = provenance(seed=result["model_config"]["seed"], started=started)
    return result


def check_corpus(data: str) -> None:
    """A .spacy file or a folder holding some, before anything loads (spaCy's Corpus only warns and reads nothing)."""
    path = Path(data)
    if not path.exists():
        raise ValueError(f"there is no corpus at {data}")
    if path.is_dir():
        if not any(path.rglob("*.spacy")):
            raise ValueError(f"{data} is a folder without .spacy files; evaluate reads spaCy's DocBin corpora")
    elif path.suffix != ".spacy":
        raise ValueError(
            f"{data} is not a .spacy file; evaluate reads spaCy's DocBin corpora (spacy convert, *-convert)"
        )


def put_first(nlp: spacy.Language, name: str) -> None:
    """Add a new segmenter `name` in front of `nlp`, replacing `nlp`'s own of that name: the sentences
    are the ones asked for, and two components cannot share a name (spaCy's E007)."""
    if name in nlp.pipe_names:
        nlp.remove_pipe(name)
    nlp.add_pipe(name, first=True)


def parser_decoders(nlp: spacy.Language) -> Dict[str, str]:
    """The decoder of each pairatt_parser in the pipeline, by component name."""
    return {name: pipe.decoder for name, pipe in nlp.pipeline if nlp.get_pipe_meta(name).factory == "pairatt_parser"}


def set_decoder(nlp: spacy.Language, decoder: str) -> None:
    """Decode every pairatt_parser of `nlp` with `decoder` from now on."""
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
    names = list(parser_decoders(nlp))
    if not names:
        raise ValueError(f"a decoder was given but the pipeline {nlp.pipe_names} has no pairatt_parser")
    for name in names:
        nlp.get_pipe(name).decoder = decoder


def predict_examples(nlp: spacy.Language, examples: List[Example], batch_size: int = 64) -> float:
    """Run the pipeline over the examples' predicted Docs in place; returns the seconds it took.

    Every Doc is kept until it is scored, and no score reads the attention maps, which take
    megabytes per transformer window (gigabytes over Re-DocRED's test documents): each Doc leaves the
    pipeline without them, as after `pairatt_release_attention` (a no-op where the pipeline has one).
    """
    release = AttentionRelease()
    start = time.perf_counter()
    docs = [release(doc) for doc in nlp.pipe((eg.predicted for eg in examples), batch_size=batch_size)]
    seconds = time.perf_counter() - start
    for example, doc in zip(examples, docs):
        example.predicted = doc
    return seconds


def copy_gold_sentence_starts(example: Example) -> None:
    """Mark the predicted tokens that begin a gold sentence (tokenizations may differ)."""
    y2x = example.alignment.y2x
    starts = {int(y2x.data[y2x.starts[sent.start]]) for sent in example.reference.sents if y2x.lengths[sent.start]}
    for token in example.predicted:
        token.is_sent_start = token.i in starts or token.i == 0
