"""Probing study: what a frozen encoder's pair-wise attention knows about dependency arcs.

The paper's probe (section 4.3) fits a tree model on the classifier input of eq. 5 for word pairs
(T_i, T_j, a_ij, a_ji) and finds that the 100 most important features are all attention weights.
Here a pair is (i, j) with i a word (the dependent) and j a candidate head; its label says whether
j is i's gold head. The features are exactly what `pairatt_parser` reads, from the same
transformer component and `features.sentence_features`, with the encoder left untrained.

Root: BERT has no root token, so, as in the parser, unit 0 is the artificial root carried by each
window's [CLS] position: a root arc (i, 0) is scored from T_[CLS] and the attention between i and
[CLS]. Every word therefore has exactly one gold head among its candidates (the other words and
the root), and UAS is the share of words whose best-scoring candidate is the gold head
(punctuation excluded, as in `scoring.score_parse`).

Layers and heads are 1-based in every name and output (L1H1 .. L6H12 for MiniLM).
"""

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training.converters import conllu_to_docs

from spacy_pairatt.integration.encoders import minilm_path
from spacy_pairatt.integration.scoring import PUNCT_LABELS
from spacy_pairatt.layers.pair_batch import UnitFeatures, sentence_features

from .probe_pairs import (
    ATTENTION_PARTS,
    DIRECTIONS,
    PARTS,
    PairFeatureLayout,
    all_candidate_pairs,
    pair_feature_matrix,
    sample_negatives,
)

PROBES = {"attention": ATTENTION_PARTS, "embedding": ("T_i", "T_j"), "both": PARTS}
INSTALL_HINT = "pip install 'spacy-pairatt[{extra}]'"
# Coarse bins and a 20,000-row sample for the bin edges: a probe, not a tuned model, and the
# binning of ~100k rows x 912 columns otherwise costs more than the boosting on a small machine.
PROBE_PARAMS = {
    "objective": "binary",
    "learning_rate": 0.1,
    "num_leaves": 31,
    "min_data_in_leaf": 20,
    "max_bin": 63,
    "bin_construct_sample_cnt": 20000,
    "force_col_wise": True,
}


def greedy_uas(
    sentence: np.ndarray, dependent: np.ndarray, score: np.ndarray, is_gold: np.ndarray, scored: np.ndarray
) -> float:
    """Share of scored words whose highest-scoring candidate head is the gold one.

    One row per candidate pair: sentence and dependent identify the word, score is the probe's
    probability, is_gold whether the candidate is the word's gold head, scored whether the word
    counts (False for punctuation). Ties go to the earlier row.
    """
    order = np.lexsort((-np.asarray(score), dependent, sentence))
    key_sorted = np.stack([np.asarray(sentence)[order], np.asarray(dependent)[order]])
    first = np.ones(len(order), dtype=bool)
    first[1:] = (key_sorted[:, 1:] != key_sorted[:, :-1]).any(axis=0)
    best = order[first]
    counted = np.asarray(scored, dtype=bool)[best]
    if not counted.any():
        raise ValueError("No scored word: UAS is undefined")
    return float(np.asarray(is_gold, dtype=bool)[best][counted].mean())


def importance_summary(
    gains: np.ndarray, layout: PairFeatureLayout, columns: np.ndarray, top_k: int = 100, top_attention: int = 20
) -> Dict:
    """Which features a probe relies on, by total split gain.

    gains[c] is the gain of probe feature c, which is layout column columns[c]. Features with zero
    gain are never counted among the top_k. Returns the attention share of the top_k, the
    top_attention attention features (part, direction, 1-based layer and head, gain and its share
    of the total) and the attention gain per direction, layer and head.
    """
    gains = np.asarray(gains, dtype="float64")
    columns = np.asarray(columns, dtype="int64")
    if gains.shape != columns.shape:
        raise ValueError(f"{len(gains)} gains for {len(columns)} columns")
    parts = layout.part_of_columns()[columns]
    index = layout.index_in_part()[columns]
    names = np.array(layout.names())[columns]
    is_attention = np.isin(parts, ATTENTION_PARTS)
    order = np.argsort(-gains, kind="stable")
    top = order[gains[order] > 0][:top_k]
    total = gains.sum()
    attention_order = order[is_attention[order] & (gains[order] > 0)][:top_attention]
    grid = np.zeros((2, layout.n_layers, layout.n_heads))
    for direction, part in enumerate(ATTENTION_PARTS):
        of_part = parts == part
        grid[direction].flat[index[of_part]] = gains[of_part]
    return {
        "top_k": int(top_k),
        "top_k_attention": int(is_attention[top].sum()),
        "top_k_embedding": int(len(top) - is_attention[top].sum()),
        "top_k_attention_share": float(is_attention[top].mean()) if len(top) else None,
        "attention_gain_share": float(gains[is_attention].sum() / total) if total > 0 else None,
        "top_attention": [
            {
                "feature": str(names[c]),
                "part": str(parts[c]),
                "direction": DIRECTIONS[str(parts[c])],
                "layer": int(index[c] // layout.n_heads) + 1,
                "head": int(index[c] % layout.n_heads) + 1,
                "gain": float(gains[c]),
                "gain_share": float(gains[c] / total),
            }
            for c in attention_order
        ],
        "attention_gain_grid": {part: grid[d].tolist() for d, part in enumerate(ATTENTION_PARTS)},
    }


def read_conllu_docs(path: Path, limit: Optional[int] = None) -> List[Doc]:
    """The first `limit` sentences (all when None) of a CoNLL-U file, one Doc each, with gold heads.

    Multiword tokens are split into their syntactic words, as in spaCy's converter.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No CoNLL-U file at {path}")
    blocks: List[str] = []
    block: List[str] = []
    with path.open(encoding="utf8") as file:
        for line in file:
            if line.strip():
                block.append(line)
            elif block:
                blocks.append("".join(block))
                block = []
                if limit is not None and len(blocks) >= limit:
                    break
    if block and (limit is None or len(blocks) < limit):
        blocks.append("".join(block))
    if not blocks:
        raise ValueError(f"{path} holds no CoNLL-U sentence")
    return list(conllu_to_docs("\n".join(blocks) + "\n", n_sents=1, no_print=True))


def gold_heads(doc: Doc) -> np.ndarray:
    """(n,) head unit of each word of a one-sentence Doc: 0 for the root, else the head's index + 1."""
    heads = np.array([token.head.i for token in doc], dtype="int64")
    return np.where(heads == np.arange(len(doc)), 0, heads + 1)


def frozen_encoder(encoder: Optional[str] = None, window: int = 128, stride: int = 96) -> Language:
    """blank English + `pairatt_transformer` with attention output, initialised and never trained.

    encoder: a local Hugging Face model directory (default: all-MiniLM-L6-v2). Windows as in
    configs/parser_minilm.cfg, so the probe reads the features the parser reads.
    """
    nlp = spacy.blank("en")
    nlp.add_pipe(
        "pairatt_transformer",
        name="transformer",
        config={
            "model": {
                "@architectures": "spacy-transformers.TransformerModel.v3",
                "name": encoder or minilm_path(),
                "get_spans": {"@span_getters": "spacy-pairatt.sent_windows.v1", "window": window, "stride": stride},
                "tokenizer_config": {"use_fast": True},
                "transformer_config": {"output_attentions": True, "attn_implementation": "eager"},
            }
        },
    )
    nlp.initialize()
    return nlp


def encoder_layout(nlp: Language) -> PairFeatureLayout:
    """Hidden width, layers and heads of the Hugging Face model inside a `frozen_encoder`."""
    config = nlp.get_pipe("transformer").model.transformer.config
    return PairFeatureLayout(config.hidden_size, config.num_hidden_layers, config.num_attention_heads)


def encode(nlp: Language, docs: Sequence[Doc], batch_size: int = 32) -> Iterator[Tuple[Doc, UnitFeatures]]:
    """Each Doc (one sentence, or a text taken as one) with its word-level features; root = unit 0."""
    for doc in nlp.pipe(docs, batch_size=batch_size):
        features, _ = sentence_features([doc], [doc._.trf_data], use_attention=True)
        if len(features) != 1:
            raise ValueError(f"Probing needs one sentence per Doc; {doc.text[:60]!r} has {len(features)}")
        yield doc, features[0]


@dataclass
class PairSet:
    """Pair feature rows of many sentences, with what UAS needs to group them."""

    features: np.ndarray  # (n_pairs, n_columns)
    is_gold: np.ndarray  # (n_pairs,) bool
    sentence: np.ndarray  # (n_pairs,) sentence index
    dependent: np.ndarray  # (n_pairs,) word unit
    scored: np.ndarray  # (n_pairs,) bool: the dependent is not punctuation
    n_sentences: int
    n_words: int


def collect_pairs(
    nlp: Language, docs: Sequence[Doc], negatives_per_word: Optional[int], seed: int, batch_size: int = 32
) -> PairSet:
    """Gold arcs plus `negatives_per_word` sampled non-arcs per word, or every candidate when None."""
    rng = np.random.default_rng(seed)
    parts: Dict[str, List[np.ndarray]] = {
        name: [] for name in ("features", "is_gold", "sentence", "dependent", "scored")
    }
    n_words = 0
    for index, (doc, features) in enumerate(encode(nlp, docs, batch_size)):
        heads = gold_heads(doc)
        punct = np.array([token.dep_.lower() in PUNCT_LABELS for token in doc])
        if negatives_per_word is None:
            dependents, candidates = all_candidate_pairs(len(doc))
        else:
            negative_dependents, negative_candidates = sample_negatives(heads, negatives_per_word, rng)
            dependents = np.concatenate([np.arange(1, len(doc) + 1), negative_dependents])
            candidates = np.concatenate([heads, negative_candidates])
        parts["features"].append(pair_feature_matrix(features, dependents, candidates))
        parts["is_gold"].append(heads[dependents - 1] == candidates)
        parts["sentence"].append(np.full(len(dependents), index))
        parts["dependent"].append(dependents)
        parts["scored"].append(~punct[dependents - 1])
        n_words += len(doc)
        doc._.trf_data = None  # the attention tensors are the bulk of the memory
    if n_words == 0:
        raise ValueError("No words to probe")
    stacked = {name: np.concatenate(arrays) for name, arrays in parts.items()}
    return PairSet(n_sentences=index + 1, n_words=n_words, **stacked)


def require_lightgbm():
    try:
        import lightgbm
    except ImportError as error:
        raise ImportError(
            f"The probe fits a LightGBM model, and lightgbm is not installed: {INSTALL_HINT.format(extra='probe')}"
        ) from error
    return lightgbm


def fit_probe(features: np.ndarray, labels: np.ndarray, names: List[str], rounds: int, seed: int, threads: int):
    """A binary gradient-boosted tree model (LightGBM, PROBE_PARAMS) on the given feature columns."""
    lightgbm = require_lightgbm()
    params = {**PROBE_PARAMS, "seed": seed, "num_threads": threads, "deterministic": True, "verbosity": -1}
    dataset = lightgbm.Dataset(features, label=labels.astype("float32"), feature_name=names, params=params)
    return lightgbm.train(params, dataset, num_boost_round=rounds)


def run_probe(
    train_path: Path,
    eval_path: Path,
    encoder: Optional[str] = None,
    max_sentences: Optional[int] = 1500,
    max_eval_sentences: Optional[int] = 300,
    negatives_per_word: int = 3,
    seed: int = 0,
    rounds: int = 100,
    threads: int = 0,
    top_k: int = 100,
) -> Dict:
    """Fit the attention-only, embedding-only and combined probes; their eval UAS and feature importance."""
    require_lightgbm()
    started = time.perf_counter()
    nlp = frozen_encoder(encoder)
    layout = encoder_layout(nlp)
    train = collect_pairs(nlp, read_conllu_docs(train_path, max_sentences), negatives_per_word, seed)
    evaluation = collect_pairs(nlp, read_conllu_docs(eval_path, max_eval_sentences), None, seed)
    extracted = time.perf_counter()
    names = layout.names()
    probes = {}
    for probe, parts in PROBES.items():
        columns = layout.columns(parts)
        booster = fit_probe(
            train.features[:, columns], train.is_gold, [names[c] for c in columns], rounds, seed, threads
        )
        scores = booster.predict(evaluation.features[:, columns])
        probes[probe] = {
            "parts": list(parts),
            "n_features": int(len(columns)),
            "uas": greedy_uas(evaluation.sentence, evaluation.dependent, scores, evaluation.is_gold, evaluation.scored),
            "importance": importance_summary(
                booster.feature_importance(importance_type="gain"), layout, columns, top_k
            ),
        }
    return {
        "encoder": encoder or minilm_path(),
        "layout": {"hidden": layout.width, "layers": layout.n_layers, "heads": layout.n_heads},
        "data": {
            split: {
                "path": str(path),
                "sentences": pairs.n_sentences,
                "words": pairs.n_words,
                "pairs": int(len(pairs.is_gold)),
                "gold_pairs": int(pairs.is_gold.sum()),
            }
            for split, path, pairs in (("train", train_path, train), ("eval", eval_path, evaluation))
        },
        "settings": {
            "negatives_per_word": negatives_per_word,
            "seed": seed,
            "rounds": rounds,
            "lightgbm": PROBE_PARAMS,
            "uas": "argmax over the root ([CLS]) and all other words of the sentence; punctuation excluded",
        },
        "probes": probes,
        "seconds": {"features": round(extracted - started, 1), "total": round(time.perf_counter() - started, 1)},
    }
