"""Benchmark pipelines on one encoder: built from the project's configs and initialised on EWT.

Speed and memory do not depend on the trained weights (apart from MST decoding, which has more
cycles to contract on an untrained model's scores: a pessimistic case for its share), so by
default each pipeline is initialised, not trained; `--model` options take trained ones instead.
"""

from pathlib import Path
from typing import List, Optional

import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.vocab import Vocab

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"
TAGGER_HEAD = {
    "factory": "tagger",
    "model": {
        "@architectures": "spacy.Tagger.v2",
        "nO": None,
        "normalize": False,
        "tok2vec": {
            "@architectures": "spacy-transformers.TransformerListener.v1",
            "grad_factor": 1.0,
            "upstream": "*",
            "pooling": {"@layers": "reduce_mean.v1"},
        },
    },
}


def load_docs(path: Path, nlp: Language, limit: int = 0) -> List[Doc]:
    docs = list(DocBin().from_disk(path).get_docs(nlp.vocab))
    return docs[:limit] if limit else docs


def unannotated(docs: List[Doc], vocab: Optional[Vocab] = None) -> List[Doc]:
    """The gold tokens alone, one sentence per Doc, as a pipeline would receive them; in the pipeline's
    `vocab` (default: the Docs' own), whose strings its annotations need (a trained transition
    parser's projectivised labels are strings of its own vocab)."""
    return [
        Doc(vocab or doc.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]) for doc in docs
    ]


def build_pipeline(
    config_name: str,
    train_path: Path,
    head: Optional[str] = None,
    n_init: int = 400,
    transformer_factory: Optional[str] = None,
    training: bool = False,
    precision: Optional[str] = None,
) -> Language:
    """A pipeline from configs/<config_name>.cfg, initialised on the first `n_init` training sentences.

    head="tagger" swaps the config's parser for a tagger on the same transformer (the
    training-step reference); transformer_factory replaces the transformer's factory
    ("transformer" or "pairatt_transformer": same model and weights, different batching).
    training: the process goes on to train, so the config's `before_init` (the training heap bound,
    `spacy_pairatt/integration/memory.py`, for the whole process) runs as in `spacy train`; otherwise
    it is left out and the pipeline runs as a loaded one does. precision: the transformer's, in
    place of the config's.
    """
    config = spacy.util.load_config(CONFIGS / f"{config_name}.cfg")
    if not training:
        config["initialize"]["before_init"] = None
    if transformer_factory:
        config["components"]["transformer"]["factory"] = transformer_factory
    if precision:
        config["components"]["transformer"]["model"]["precision"] = precision
    if head == "tagger":
        parser = config["nlp"]["pipeline"][-1]
        config["nlp"]["pipeline"] = ["transformer", "tagger"]
        del config["components"][parser]
        config["components"]["tagger"] = TAGGER_HEAD
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    gold = load_docs(train_path, nlp, n_init)
    examples = [Example(predicted, reference) for predicted, reference in zip(unannotated(gold), gold)]
    nlp.initialize(lambda: examples)
    return nlp


def load_or_build(
    model: Optional[str], config_name: str, train_path: Path, transformer_factory: Optional[str] = None
) -> Language:
    """The trained pipeline at `model`, else one built from configs/<config_name>.cfg and initialised;
    transformer_factory as in `build_pipeline` (a saved pipeline keeps its weights)."""
    if not model:
        return build_pipeline(config_name, train_path, transformer_factory=transformer_factory)
    config = spacy.util.load_config(Path(model) / "config.cfg")
    if transformer_factory:
        config["components"]["transformer"]["factory"] = transformer_factory
    return spacy.util.load_model_from_path(Path(model), config=config)
