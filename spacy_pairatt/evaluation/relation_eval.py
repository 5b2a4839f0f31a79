"""Evaluate relation pipelines: SemEval-2010 Task 8 (official macro-F1) and Re-DocRED (F1, Ign F1, AUC).

Entities are given (gold tokens and candidate spans on the Docs the pipeline sees), as both tasks
define their evaluation.
"""

import time
from typing import Dict, List

import spacy
from spacy.language import Language
from spacy.tokens import DocBin
from spacy.training import Example

from ..corpora.docred import SPANS_KEY, docred_facts, name_triples, score_docred
from ..corpora.relation_metrics import tune_threshold
from ..corpora.semeval import score_semeval, semeval_label
from ..integration.doc_relations import ENTS
from ..integration.extensions import register_extensions
from ..reporting.provenance import model_provenance, provenance
from ..training.corpus import make_gold_spans_corpus
from .parser_eval import predict_examples

# Relations below this probability are not written while evaluating Re-DocRED: the threshold is
# tuned afterwards and the precision-recall curve (AUC) is traced over everything above it.
DOCRED_CANDIDATE_FLOOR = 0.01


def _given_entities(nlp: Language, data: str, spans_key: str) -> List[Example]:
    examples = list(make_gold_spans_corpus(data, spans_key)(nlp))
    if not examples:
        raise ValueError(f"{data} holds no documents")
    return examples


def _run_info(model: str, nlp: Language, examples: List[Example], seconds: float, started: float) -> Dict:
    """What every relation result records: the model, its features and config, the timing and provenance."""
    n_words = sum(len(eg.predicted) for eg in examples)
    config = model_provenance(nlp, model)
    component = nlp.get_pipe("pairatt_rel")
    scorer = component.model.get_ref("pair_scorer").attrs
    parts = (("emb", scorer["use_embeddings"]), ("att", scorer["use_attention"]))
    return {
        "model": str(model),
        "features": "+".join(name for name, used in parts if used),
        "n_docs": len(examples),
        "seconds": seconds,  # exact: rounded once, where a table prints it
        "words_per_second": n_words / seconds,
        "model_config": config,
        "provenance": provenance(seed=config["seed"], started=started),
    }


def evaluate_semeval(model: str, data: str, batch_size: int = 64, labels: bool = False) -> Dict:
    """The official scorer's figures on a converted SemEval split (a pair's best relation, else Other);
    labels: also "labels", each sentence's gold and predicted 19-way label (for a paired bootstrap)."""
    started = time.time()
    nlp = spacy.load(model)
    examples = _given_entities(nlp, data, ENTS)
    seconds = predict_examples(nlp, examples, batch_size)
    scores = score_semeval(examples, 0.0)
    result = {
        **_run_info(model, nlp, examples, seconds, started),
        "task": "semeval",
        "data": str(data),
        "scores": scores,
    }
    if labels:
        result["labels"] = {
            "gold": [semeval_label(example.reference) for example in examples],
            "predicted": [semeval_label(example.predicted, 0.0) for example in examples],
        }
    return result


def evaluate_docred(model: str, tune: str, test: str, train: str, batch_size: int = 16) -> Dict:
    """θ tuned for F1 on `tune`, then F1, Ign F1 (facts seen in `train` discounted) and AUC on `test`."""
    started = time.time()
    register_extensions()
    nlp = spacy.load(model, config={"components": {"pairatt_rel": {"threshold": DOCRED_CANDIDATE_FLOOR}}})
    tune_examples = _given_entities(nlp, tune, SPANS_KEY)
    predict_examples(nlp, tune_examples, batch_size)
    theta = tune_threshold(
        docred_facts(eg.reference for eg in tune_examples), docred_facts(eg.predicted for eg in tune_examples)
    )
    test_examples = _given_entities(nlp, test, SPANS_KEY)
    seconds = predict_examples(nlp, test_examples, batch_size)
    train_docs = DocBin(store_user_data=True).from_disk(train).get_docs(nlp.vocab)
    scores = score_docred(test_examples, name_triples(train_docs), theta)
    return {
        **_run_info(model, nlp, test_examples, seconds, started),
        "task": "docred",
        "data": {"tune": str(tune), "test": str(test), "train": str(train)},
        "theta": theta,
        "candidate_floor": DOCRED_CANDIDATE_FLOOR,
        "scores": scores,
    }
