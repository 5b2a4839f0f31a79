"""One trained parser, two precisions: does parsing in bfloat16 give the float32 trees and confidences?

The pipeline at MODEL is loaded with its transformers in float32 and in bfloat16 (same weights,
`layers/precision.py`) and parses the dev and test treebanks with gold tokens and sentences. Per
split and precision: UAS and LAS (spaCy's scorer, punctuation excluded, as `evaluate` reports);
between the precisions, the share of words whose decoded head is the same; and the calibrated
confidence's ECE (head_prob and dep_prob), with the temperatures fitted on dev in float32 (what a
pipeline calibrated in float32 stores) and fitted in each precision's own outputs.

    python bench/precision_accuracy.py training/pairatt/model-best --output results/precision_parse_minilm.json
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Dict

import numpy as np
import spacy
from spacy.training import Corpus
from spacy.util import load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from spacy_pairatt.evaluation.calibration import (  # noqa: E402
    calibration_report,
    collect_decoded,
    confidence_and_correctness,
    expected_calibration_error,
)
from spacy_pairatt.evaluation.parser_eval import copy_gold_sentence_starts, predict_examples  # noqa: E402
from spacy_pairatt.integration.scoring import score_parse  # noqa: E402
from spacy_pairatt.layers.precision import precision_overrides  # noqa: E402
from spacy_pairatt.reporting.json_files import write_json  # noqa: E402
from spacy_pairatt.reporting.provenance import code_at_start, model_provenance, provenance  # noqa: E402

PRECISIONS = ("float32", "bfloat16")


def attachment_scores(nlp, data: str) -> Dict[str, float]:
    """UAS and LAS on `data` with gold sentences, as `evaluate --sentences gold` scores them."""
    examples = list(Corpus(data)(nlp))
    for example in examples:
        copy_gold_sentence_starts(example)
    predict_examples(nlp, examples)
    scores = score_parse(examples)
    return {"uas": scores["dep_uas"], "las": scores["dep_las"]}


def decoded_heads(chunks) -> np.ndarray:
    """Every word's decoded head (units 1..length of each sentence row), chunk by chunk, in corpus order."""
    heads = []
    for chunk in chunks:
        units = np.arange(chunk.decoded.heads.shape[1])
        words = (units[None, :] >= 1) & (units[None, :] <= chunk.decoded.lengths[:, None])
        heads.append(chunk.decoded.heads[words])
    return np.concatenate(heads)


def ece(chunks, arc_temperature: float, label_temperature: float) -> Dict[str, float]:
    values = confidence_and_correctness(chunks, arc_temperature, label_temperature)
    return {
        "head_prob_ece": expected_calibration_error(values["head_prob"], values["head_right"]),
        "dep_prob_ece": expected_calibration_error(values["dep_prob"], values["label_right"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained pipeline with a pairatt_parser")
    parser.add_argument("--dev", default="corpus/ud_ewt/en_ewt-ud-dev.spacy")
    parser.add_argument("--test", default="corpus/ud_ewt/en_ewt-ud-test.spacy")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    started = time.time()
    config = load_config(Path(args.model) / "config.cfg")
    splits = {"dev": args.dev, "test": args.test}
    scores, chunks, calibration = {}, {}, {}
    for precision in PRECISIONS:
        nlp = spacy.load(args.model, config=precision_overrides(config, precision))
        scores[precision] = {split: attachment_scores(nlp, path) for split, path in splits.items()}
        chunks[precision] = {split: collect_decoded(nlp, path) for split, path in splits.items()}
        report = calibration_report(chunks[precision]["dev"], chunks[precision]["test"])
        calibration[precision] = {key: report[key] for key in ("arc_temperature", "label_temperature")}
        calibration[precision]["test_own_temperatures"] = ece(
            chunks[precision]["test"], report["arc_temperature"], report["label_temperature"]
        )
        print(precision, scores[precision], calibration[precision])
    float32_temperatures = (calibration["float32"]["arc_temperature"], calibration["float32"]["label_temperature"])
    for precision in PRECISIONS:
        calibration[precision]["test_float32_temperatures"] = ece(chunks[precision]["test"], *float32_temperatures)
    agreement = {
        split: float(np.mean(decoded_heads(chunks["float32"][split]) == decoded_heads(chunks["bfloat16"][split])))
        for split in splits
    }
    difference = {
        split: {m: round(scores["bfloat16"][split][m] - scores["float32"][split][m], 5) for m in ("uas", "las")}
        for split in splits
    }
    write_json(
        Path(args.output),
        {
            "model": args.model,
            "data": splits,
            "scores": scores,
            "bfloat16_minus_float32": difference,
            "head_agreement": agreement,
            "calibration": calibration,
            "model_config": model_provenance(nlp, args.model),
            "provenance": provenance(started=started),
        },
    )
    print("difference", difference, "head agreement", agreement)


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    main()
