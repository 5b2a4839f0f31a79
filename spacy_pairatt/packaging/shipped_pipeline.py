"""Turn a trained pipeline into the shipped one (`assemble`), and show what it does (`demo`)."""

import json
from importlib.metadata import requires
from pathlib import Path
from typing import Dict, List, Optional

import numpy
import spacy
from packaging.requirements import Requirement
from spacy import displacy
from spacy.cli.package import generate_readme
from spacy.util import get_minor_version_range

from ..about import __version__
from ..integration.load_settings import KEEP_CONFIG_SETTINGS
from ..reporting.json_files import write_text
from ..runs.scratch import replace_pipeline_folder

EXAMPLE_TEXTS = [
    "The new parser reads the attention between every pair of words. It then builds one tree per sentence!",
    "I didn't think the transformer's heads would know so much about syntax.",
    "Dr. Smith flew from Boston to San Francisco on Tuesday to present the results.",
]
# What each trained component adds, in the words of the model card's description.
COMPONENT_DESCRIPTIONS = {
    "senter": "sentence boundaries",
    "tagger": "Penn Treebank tags (XPOS, Token.tag_)",
    "morphologizer": "UPOS and morphological features (Token.pos_, Token.morph)",
    "trainable_lemmatizer": "lemmas (edit trees, Token.lemma_)",
    "lemmatizer": "lemmas (edit trees on lowercased text and a casing, Token.lemma_)",
}


def describe_pipeline(nlp, encoder: Optional[Dict]) -> str:
    """The model card's description: what the shipped components annotate, which read the shared transformer, and
    `encoder` (encoder_source's) by name."""
    listening = set(nlp.get_pipe("transformer").listener_map) if "transformer" in nlp.pipe_names else set()
    shared = [text for name, text in COMPONENT_DESCRIPTIONS.items() if name in listening]
    apart = [text for name, text in COMPONENT_DESCRIPTIONS.items() if name in nlp.pipe_names and name not in listening]
    if "sentencizer" in nlp.pipe_names:
        apart.append("sentence boundaries by spaCy's rule-based sentencizer")
    description = (
        f"English pipeline from spacy-pairatt. Read from one shared {encoder['name'] + ' ' if encoder else ''}"
        "transformer with attention "
        f"output: {''.join(text + ', ' for text in shared)}the dependency parse (pairatt_parser: a biaffine "
        "pair scorer over hidden states and the attention weights of every layer and head, MST decoding)."
    )
    if apart:
        description += f" With their own model: {', '.join(apart)}."
    return description + " Trained on UD English-EWT 2.16 (train split); scores are on its test split."


MODEL_CARD = {"name": "pairatt", "license": "CC BY-SA 4.0"}
TRAINING_DATA = {
    "name": "UD English-EWT 2.16",
    "url": "https://github.com/UniversalDependencies/UD_English-EWT",
    "license": "CC BY-SA 4.0",
}
# The encoders the shipped tiers are fine-tuned from (en_pairatt's, en_pairatt_trf's), by Hugging Face model type.
ENCODER_SOURCES = {
    "bert": {
        "name": "all-MiniLM-L6-v2",
        "url": "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2",
        "license": "Apache 2.0",
    },
    "mpnet": {
        "name": "all-mpnet-base-v2",
        "url": "https://huggingface.co/sentence-transformers/all-mpnet-base-v2",
        "license": "Apache 2.0",
    },
}


def encoder_source(nlp) -> Optional[Dict]:
    """The source of the pipeline's encoder for meta.json; None for a transformer of another type, or none."""
    if "transformer" not in nlp.pipe_names:
        return None
    return ENCODER_SOURCES.get(nlp.get_pipe("transformer").model.transformer.config.model_type)


# ud-eval figures, (metric, figure, key), under the names spaCy's meta.json and model card use: tags and
# lemmas on gold tokens (F1 is accuracy there), the senter's scores from Sentences on raw text.
UD_META_SCORES = tuple(
    (metric, "f1", key)
    for metric, key in (("UPOS", "pos_acc"), ("XPOS", "tag_acc"), ("UFeats", "morph_acc"), ("Lemmas", "lemma_acc"))
)
SENTENCE_META_SCORES = tuple(
    ("Sentences", figure, key) for figure, key in (("precision", "sents_p"), ("recall", "sents_r"), ("f1", "sents_f"))
)
EVALUATE_OUTPUT = "python -m spacy_pairatt evaluate --output"  # what writes each results file it reads
UD_EVAL_OUTPUT = "python -m spacy_pairatt ud-eval --output"


def package_requirements() -> List[str]:
    """spacy-pairatt, whose code the pipeline runs, and the stack it pins, so that installing the package
    gets the versions the weights were saved with; `spacy package` adds spaCy's own range."""
    stack = [Requirement(text) for text in requires("spacy-pairatt") or []]
    return [f"spacy-pairatt{get_minor_version_range(__version__)}"] + [
        str(req) for req in stack if req.marker is None and req.name != "spacy"
    ]


def model_weights(model) -> List[numpy.ndarray]:
    """Every weight of a Thinc model: its parameters and its torch modules' state, in walk order."""
    arrays = []
    for node in model.walk():
        arrays += [model.ops.to_numpy(node.get_param(name)) for name in node.param_names if node.has_param(name)]
        for shim in node.shims:
            if shim._model is not None:
                arrays += [tensor.detach().cpu().numpy() for tensor in shim._model.state_dict().values()]
    return arrays


def same_weights(first, second) -> bool:
    """Whether two Thinc models hold the same weights (serialized bytes differ between two saves of
    the same weights); two models without any are not the same."""
    mine, theirs = model_weights(first), model_weights(second)
    return len(mine) == len(theirs) > 0 and all(
        a.shape == b.shape and numpy.array_equal(a, b) for a, b in zip(mine, theirs)
    )


def put_senter(nlp: spacy.Language, source: spacy.Language, where: str) -> None:
    """The `senter` of `source` into `nlp`: where nlp's own senter is (the components before it see
    what they saw in training, the ones after read the new sentences), else right after the
    transformer it listens to, else in front. A senter that listens to a transformer needs the
    very transformer it was trained on: nlp's must have the same weights, or it is refused."""
    if "senter" not in source.pipe_names:
        raise ValueError(f"the pipeline at {where} has no senter (its components: {', '.join(source.pipe_names)})")
    upstream = next(
        (name for name, pipe in source.pipeline if "senter" in getattr(pipe, "listening_components", [])), None
    )
    if upstream is not None:
        if upstream not in nlp.pipe_names:
            raise ValueError(f"the senter at {where} listens to a component {upstream!r} that the pipeline lacks")
        if not same_weights(nlp.get_pipe(upstream).model, source.get_pipe(upstream).model):
            raise ValueError(
                f"the senter at {where} listens to its own {upstream!r}, whose weights differ from the pipeline's: "
                "train it on this pipeline's transformer (configs/segmenter_listener.cfg, paths.encoder_pipeline)"
            )
    if "senter" in nlp.pipe_names:
        nlp.add_pipe("senter", name="sourced_senter", source=source, before="senter")
        nlp.remove_pipe("senter")
        nlp.rename_pipe("sourced_senter", "senter")
    elif upstream is not None:
        nlp.add_pipe("senter", source=source, after=upstream)
    else:
        nlp.add_pipe("senter", source=source, first=True)


def assemble_pipeline(
    model: str,
    output: str,
    accuracy: Optional[str] = None,
    senter: Optional[str] = None,
    version: Optional[str] = None,
    notes: str = "",
    ud_scores: Optional[str] = None,
    sentence_scores: Optional[str] = None,
) -> None:
    """Put a sentence segmenter in front so raw multi-sentence text gets one tree per sentence, drop the
    attention maps from the Docs after the parser, and add the metadata and model card that `spacy package`
    ships.

    senter: a pipeline whose trained `senter` (a pairatt_segmenter) is sourced, in place of the
    pipeline's own senter where it has one, else in front; without it, a pipeline without a
    segmenter gets spaCy's rule-based sentencizer in front.
    version: the package version, for meta.json and the model card.
    notes: Markdown that ends the model card (spaCy's generated README.md): in a checkout, the data, licence,
    measured figures and limits that projects/paper's `model-card` command writes from the results files.
    ud_scores: `ud-eval --output` JSON on gold tokens, whose tag, morphology and lemma scores go into meta.json
    under spaCy's names (pos_acc, tag_acc, morph_acc, lemma_acc), as spaCy's model card shows them.
    sentence_scores: `ud-eval --output` JSON on raw text, whose Sentences precision, recall and F1 are
    meta.json's sents_p, sents_r and sents_f. An `accuracy` file scored with gold sentences gives none:
    its sentence figures are 100 by construction and would claim a perfect segmenter.
    """
    nlp = spacy.load(model)
    if senter:
        put_senter(nlp, spacy.load(senter), senter)
    elif not {"sentencizer", "senter"} & set(nlp.pipe_names):
        nlp.add_pipe("sentencizer", first=True)
    # a pipeline trained from an older config loads with its spaCy pipes keeping their settings too
    nlp.config["nlp"]["after_pipeline_creation"] = dict(KEEP_CONFIG_SETTINGS)
    if "pairatt_release_attention" not in nlp.pipe_names:
        # Attention is read by the parser only; dropped after it (keep="float16" keeps word-level maps).
        nlp.add_pipe("pairatt_release_attention")
    encoder = encoder_source(nlp)
    nlp.meta.update(
        MODEL_CARD,
        sources=[TRAINING_DATA] + ([encoder] if encoder else []),
        description=describe_pipeline(nlp, encoder),
        notes=notes,
        requirements=package_requirements(),
    )
    if version:
        nlp.meta["version"] = version
    if accuracy:
        evaluation = read_results(accuracy, EVALUATE_OUTPUT)
        scores = results_field(evaluation, accuracy, "scores", EVALUATE_OUTPUT)
        by_construction = {key for *_, key in SENTENCE_META_SCORES} if evaluation.get("sentences") == "gold" else set()
        nlp.meta["performance"] = {
            key: value for key, value in scores.items() if not isinstance(value, dict) and key not in by_construction
        }
    for path, wanted in ((ud_scores, UD_META_SCORES), (sentence_scores, SENTENCE_META_SCORES)):
        if path:
            nlp.meta.setdefault("performance", {}).update(ud_meta_scores(path, wanted))
    save_shipped_pipeline(nlp, Path(output))
    print(f"Saved {nlp.pipe_names} to {output}")


def save_shipped_pipeline(nlp: spacy.Language, output: Path) -> None:
    """Save `nlp` with its model card in place of `output` (see scratch.replace_pipeline_folder): no file
    of an earlier build there (a component since dropped) ships with it, and a stopped run leaves the
    earlier build whole."""

    def write(folder: Path) -> None:
        nlp.to_disk(folder)
        # `spacy package` generates the same card from meta.json only when its output directory has none, so
        # a rebuild with --force would ship the previous build's card; one in the pipeline folder replaces it.
        (folder / "README.md").write_text(generate_readme(nlp.meta), encoding="utf8")

    replace_pipeline_folder(output, write)


def read_results(path: str, made_by: str) -> Dict:
    """The results JSON object at `path`; a file that is not one is a ValueError naming it and the command
    that writes the right one (a missing file stays an OSError naming the path)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error}); expected the output of {made_by}") from error
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object; expected the output of {made_by}")
    return data


def results_field(data: Dict, path: str, field: str, made_by: str) -> Dict:
    """`field` of the results `data` read from `path`, which must be an object."""
    if not isinstance(data.get(field), dict):
        raise ValueError(f'{path}: no "{field}" object; expected the output of {made_by}')
    return data[field]


def ud_meta_scores(path: str, wanted) -> Dict[str, float]:
    """meta.json's scores from an `ud-eval --output` file: {key: metrics[metric][figure]} for each
    (metric, figure, key) of `wanted`; a metric the file lacks is a ValueError naming it."""
    metrics = results_field(read_results(path, UD_EVAL_OUTPUT), path, "metrics", UD_EVAL_OUTPUT)
    missing = list(dict.fromkeys(metric for metric, _, _ in wanted if metric not in metrics))
    if missing:
        raise ValueError(f'{path}: no {", ".join(missing)} under "metrics" (an ud-eval --output file has them)')
    return {key: metrics[metric][figure] for metric, figure, key in wanted}


def parse_examples(model: str, output: Optional[str] = None, texts: Optional[List[str]] = None) -> None:
    """Parse texts (sentencizer added if the pipeline has no segmenter), print and render them."""
    nlp = spacy.load(model)
    if not {"sentencizer", "senter", "parser"} & set(nlp.pipe_names):
        nlp.add_pipe("sentencizer", first=True)
    docs = list(nlp.pipe(texts or EXAMPLE_TEXTS))
    for doc in docs:
        for sent in doc.sents:
            print(sent.text)
            for token in sent:
                head = "ROOT" if token.head.i == token.i else f"{token.head.text}-{token.head.i - sent.start + 1}"
                print(f"  {token.i - sent.start + 1:>3} {token.text:<15} {token.dep_:<12} {head}")
    if output:
        html = displacy.render(docs, style="dep", page=True, options={"compact": True})
        write_text(output, html)
        print(f"Saved the rendering to {output}")
