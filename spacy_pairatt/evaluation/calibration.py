"""Is the parser's confidence calibrated? Temperatures fitted on dev, ECE, reliability, error recall.

Plain functions over arrays, plus `collect_decoded` which runs a pipeline's `pairatt_parser` once
over gold-tokenized Docs and keeps what every temperature needs (the decoder's inputs and outputs
and the gold heads and labels), so fitting a temperature never re-runs the transformer.
"""

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

N_BINS = 15
UNKNOWN_LABEL = -2  # a gold label the parser was not trained on: always wrong, not in the label likelihood
TEMPERATURE_BOUNDS = (0.05, 20.0)


@dataclass
class GoldChunk:
    """A DecodedChunk (`components/parser.py`) with gold heads and label ids (B, N), -1 where the gold
    data has no arc, UNKNOWN_LABEL for a label the parser does not know."""

    decoded: object
    gold_heads: np.ndarray
    gold_labels: np.ndarray


def reliability_bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> Dict[str, list]:
    """Equal-width bins over [0, 1]: count, mean confidence and accuracy per bin (None when empty)."""
    confidence, correct = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    known = np.isfinite(confidence)  # NaN: a sentence whose marginals float64 could not give
    confidence, correct = confidence[known], correct[known]
    index = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    counts = np.bincount(index, minlength=n_bins)
    sums = np.bincount(index, weights=confidence, minlength=n_bins)
    hits = np.bincount(index, weights=correct, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_confidence, accuracy = sums / counts, hits / counts
    return {
        "edges": np.linspace(0, 1, n_bins + 1).round(4).tolist(),
        "count": counts.tolist(),
        "confidence": [None if c == 0 else round(float(v), 5) for c, v in zip(counts, mean_confidence)],
        "accuracy": [None if c == 0 else round(float(v), 5) for c, v in zip(counts, accuracy)],
    }


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> float:
    """ECE: the count-weighted mean |accuracy - confidence| over equal-width bins (Guo et al. 2017)."""
    bins = reliability_bins(confidence, correct, n_bins)
    total = sum(bins["count"])
    gaps = [
        count * abs(accuracy - mean)
        for count, mean, accuracy in zip(bins["count"], bins["confidence"], bins["accuracy"])
        if count
    ]
    return float(sum(gaps) / max(total, 1))


def error_recall_at(confidence: np.ndarray, has_error: np.ndarray, fraction: float = 0.2) -> Dict[str, float]:
    """Of the sentences with an error, the share among the `fraction` least confident sentences;
    with the best any ranking could reach (all flagged sentences wrong) and a random ranking's."""
    confidence, has_error = np.asarray(confidence, dtype=float), np.asarray(has_error, dtype=bool)
    n_flagged = int(np.ceil(fraction * len(confidence)))
    flagged = np.argsort(confidence, kind="stable")[:n_flagged]
    n_errors = max(int(has_error.sum()), 1)
    return {
        "recall": float(has_error[flagged].sum() / n_errors),
        "best_possible": float(min(n_flagged, n_errors) / n_errors),
        "random": float(fraction),
        "n_sentences": int(len(confidence)),
        "n_with_error": int(has_error.sum()),
    }


def fit_temperature(negative_log_likelihood) -> float:
    """The temperature in TEMPERATURE_BOUNDS minimising a dev negative log-likelihood (a bounded
    search over log T: the likelihood is smooth and, in practice, unimodal in T)."""
    low, high = np.log(TEMPERATURE_BOUNDS)
    result = minimize_scalar(
        lambda log_t: negative_log_likelihood(float(np.exp(log_t))), bounds=(low, high), method="bounded"
    )
    return float(np.exp(result.x))


def _words(chunk: GoldChunk) -> Tuple[np.ndarray, np.ndarray]:
    """(sentence, unit) indices of the chunk's words that have a gold head."""
    lengths = chunk.decoded.lengths
    units = np.arange(chunk.gold_heads.shape[1])
    words = (units[None, :] >= 1) & (units[None, :] <= lengths[:, None]) & (chunk.gold_heads >= 0)
    return np.nonzero(words)


def head_nll(chunks: Sequence[GoldChunk], temperature: float) -> float:
    """Mean -log marginal of each word's gold arc."""
    total, count = 0.0, 0
    for chunk in chunks:
        marginals = chunk.decoded.confidence_at(temperature, 1.0, n_candidates=1)["marginals"]
        b, i = _words(chunk)
        total -= np.log(np.maximum(marginals[b, i, chunk.gold_heads[b, i]], 1e-300)).sum()
        count += len(b)
    return total / max(count, 1)


def _label_log_probs(chunk: GoldChunk, temperature: float) -> np.ndarray:
    logits = np.where(chunk.decoded.allowed, chunk.decoded.label_scores / temperature, -np.inf)
    return logits - logsumexp(logits, axis=-1, keepdims=True)


def _right_arcs(chunk: GoldChunk) -> Tuple[np.ndarray, np.ndarray]:
    """Words whose decoded head is the gold one: where the label's probability given the arc is judged."""
    b, i = _words(chunk)
    keep = (chunk.decoded.heads[b, i] == chunk.gold_heads[b, i]) & (chunk.gold_labels[b, i] != -1)
    return b[keep], i[keep]


def label_nll(chunks: Sequence[GoldChunk], temperature: float) -> float:
    """Mean -log probability of the gold label on the decoded arcs that are right."""
    total, count = 0.0, 0
    for chunk in chunks:
        b, i = _right_arcs(chunk)
        known = chunk.gold_labels[b, i] >= 0
        b, i = b[known], i[known]
        log_probs = _label_log_probs(chunk, temperature)
        total -= np.maximum(log_probs[b, i, chunk.gold_labels[b, i]], -700).sum()
        count += len(b)
    return total / max(count, 1)


def confidence_and_correctness(chunks: Sequence[GoldChunk], arc_temperature: float, label_temperature: float) -> Dict:
    """Per word: head_prob and whether the head is right; per right arc: dep_prob and whether the
    label is right; per sentence: parse_confidence (P(decoded labelled tree)) and whether it has
    any wrong arc or label."""
    out = {key: [] for key in ("head_prob", "head_right", "dep_prob", "label_right", "tree_prob", "has_error")}
    for chunk in chunks:
        decoded = chunk.decoded
        confidence = decoded.confidence_at(arc_temperature, label_temperature, n_candidates=1)
        b, i = _words(chunk)
        head_right = decoded.heads[b, i] == chunk.gold_heads[b, i]
        out["head_prob"].append(confidence["head_prob"][b, i])
        out["head_right"].append(head_right)
        rb, ri = _right_arcs(chunk)
        out["dep_prob"].append(confidence["dep_prob"][rb, ri])
        out["label_right"].append(decoded.labels[rb, ri] == chunk.gold_labels[rb, ri])
        wrong = np.zeros(len(decoded.lengths), dtype=bool)
        np.logical_or.at(wrong, b, ~head_right | (decoded.labels[b, i] != chunk.gold_labels[b, i]))
        out["has_error"].append(wrong)
        out["tree_prob"].append(confidence["tree_prob"])
    return {key: np.concatenate(values) for key, values in out.items()}


def collect_decoded(nlp, data: str, batch_size: int = 64, parser_name: str = "") -> List[GoldChunk]:
    """Run the pipeline's parser once over a .spacy corpus's gold tokens and gold sentences; keep
    each chunk's decoder inputs and outputs with the gold heads and labels. The components before
    the parser run, but for those that set sentence boundaries (a senter would undo the gold ones)."""
    from spacy.training import Corpus

    from .parser_eval import copy_gold_sentence_starts

    parser_name = parser_name or next(name for name, pipe in nlp.pipeline if hasattr(pipe, "decode_chunks"))
    parser = nlp.get_pipe(parser_name)
    before = [
        name
        for name in nlp.pipe_names[: nlp.pipe_names.index(parser_name)]
        if not {"token.is_sent_start", "doc.sents"} & set(nlp.get_pipe_meta(name).assigns)
    ]
    examples = list(Corpus(data)(nlp))
    if not examples:
        raise ValueError(f"{data} holds no documents")
    unparsed = [number for number, example in enumerate(examples) if not example.reference.has_annotation("DEP")]
    if unparsed:
        raise ValueError(
            f"{data}: {len(unparsed)} of its {len(examples)} documents have no gold parse (heads and labels), "
            f"the first is document {unparsed[0]}: calibration needs a treebank"
        )
    chunks = []
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        for example in batch:
            copy_gold_sentence_starts(example)
        docs = [example.predicted for example in batch]
        for name in before:
            docs = list(nlp.get_pipe(name).pipe(docs))
        aligned: Dict = {}
        for decoded in parser.decode_chunks(docs):
            gold_heads, gold_labels = parser.gold_arrays(
                batch, decoded.sentences, decoded.heads.shape, aligned, unknown_label=UNKNOWN_LABEL
            )
            chunks.append(GoldChunk(decoded, gold_heads, gold_labels))
    return chunks


def calibration_report(dev: Sequence[GoldChunk], test: Sequence[GoldChunk]) -> Dict:
    """Temperatures fitted on dev (arcs: gold-arc marginal likelihood; labels: gold-label likelihood on
    right arcs), and on dev and test before and after them: ECE of head_prob and dep_prob, reliability
    bins, and the recall of sentences with an error among the 20% least confident."""
    arc_temperature = fit_temperature(lambda t: head_nll(dev, t))
    label_temperature = fit_temperature(lambda t: label_nll(dev, t))
    report = {"arc_temperature": arc_temperature, "label_temperature": label_temperature, "n_bins": N_BINS}
    for split, chunks in (("dev", dev), ("test", test)):
        for when, temperatures in (("before", (1.0, 1.0)), ("after", (arc_temperature, label_temperature))):
            values = confidence_and_correctness(chunks, *temperatures)
            report[f"{split}_{when}"] = {
                "head_prob_ece": expected_calibration_error(values["head_prob"], values["head_right"]),
                "dep_prob_ece": expected_calibration_error(values["dep_prob"], values["label_right"]),
                "head_accuracy": float(values["head_right"].mean()),
                "mean_head_prob": float(values["head_prob"].mean()),
                "label_accuracy_on_right_arcs": float(values["label_right"].mean()),
                "mean_dep_prob": float(values["dep_prob"].mean()),
                "head_prob_nll": head_nll(chunks, temperatures[0]),
                "sentence_error_recall_at_20pct": error_recall_at(values["tree_prob"], values["has_error"]),
                "head_prob_bins": reliability_bins(values["head_prob"], values["head_right"]),
                "dep_prob_bins": reliability_bins(values["dep_prob"], values["label_right"]),
            }
    after = report["test_after"]
    report["head_prob_ece"] = after["head_prob_ece"]
    report["dep_prob_ece"] = after["dep_prob_ece"]
    report["sentence_error_recall_at_20pct"] = after["sentence_error_recall_at_20pct"]["recall"]
    return report


def plot_reliability(report: Dict, path: str) -> None:
    """Reliability diagrams of head_prob and dep_prob on test, before and after the temperatures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(9, 4.2), sharey=True)
    for axis, key, title in zip(axes, ("head_prob", "dep_prob"), ("head_prob (arc)", "dep_prob (label | right arc)")):
        axis.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
        for when, style in (("before", "o--"), ("after", "s-")):
            split = report[f"test_{when}"]
            bins = split[f"{key}_bins"]
            points = [(c, a) for c, a in zip(bins["confidence"], bins["accuracy"]) if c is not None]
            axis.plot(*zip(*points), style, markersize=4, label=f"{when} (ECE {split[f'{key}_ece']:.3f})")
        axis.set_title(f"EWT test: {title}")
        axis.set_xlabel("confidence")
        axis.legend(loc="upper left", fontsize=8)
    axes[0].set_ylabel("accuracy")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
