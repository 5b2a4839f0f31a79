"""The parser's confidence (docs/confidence.md): its calibration (results/calibration.json, written by
`calibrate`), what storing it costs (results/bench_speed.json) and the arc objectives compared on dev."""

from typing import Dict

from .results import Results, source_note

CALIBRATION_FILE = "results/calibration.json"
SPEED_FILE = "results/bench_speed.json"
OBJECTIVE_FILES = {"local": "results/pairatt_dev.json", "tree_crf": "results/pairatt_treecrf_dev.json"}
CALIBRATION_COLUMNS = (
    "split", "temperatures", "head_prob ECE", "mean head_prob", "head accuracy", "dep_prob ECE", "mean dep_prob",
    "label accuracy (right arcs)", "error sentences in the least confident 20%",
)  # fmt: skip


def calibration_row(report: Dict, split: str, when: str) -> str:
    values = report[f"{split}_{when}"]
    recall = values["sentence_error_recall_at_20pct"]
    temperatures = "1, 1" if when == "before" else f"{report['arc_temperature']:.2f}, {report['label_temperature']:.2f}"
    cells = [
        split,
        temperatures,
        f"{values['head_prob_ece']:.4f}",
        f"{100 * values['mean_head_prob']:.1f}",
        f"{100 * values['head_accuracy']:.1f}",
        f"{values['dep_prob_ece']:.4f}",
        f"{100 * values['mean_dep_prob']:.1f}",
        f"{100 * values['label_accuracy_on_right_arcs']:.1f}",
        f"{100 * recall['recall']:.1f}% of {recall['n_with_error']:,} (at most {100 * recall['best_possible']:.1f}%)",
    ]
    return "| " + " | ".join(cells) + " |"


def calibration_block(results: Results) -> str:
    """ECE and error recall on dev and test, before and after the temperatures fitted on dev."""
    report = results.json(CALIBRATION_FILE)
    note = source_note(results, [(CALIBRATION_FILE, "parser")], "python -m spacy project run calibrate")
    if report is None:
        return note
    lines = ["| " + " | ".join(CALIBRATION_COLUMNS) + " |", "|" + "---|" * len(CALIBRATION_COLUMNS)]
    lines += [calibration_row(report, split, when) for split in ("dev", "test") for when in ("before", "after")]
    model = f"`{report['model']}`"
    return (
        "\n".join(lines)
        + f"\n\nModel: {model}; {report['n_bins']} equal-width bins; temperatures: arcs, labels.\n\n"
        + note
    )


def confidence_cost_block(results: Results) -> str:
    """Words/s relative to the transformer alone (b/a) with each `confidence` setting, one interleaved run."""
    bench = results.json(SPEED_FILE)
    note = source_note(results, [(SPEED_FILE, "bench")], "python -m spacy project run bench-speed")
    inference = (bench or {}).get("inference", {})
    if "ratio_b_confidence_none_over_a" not in inference:
        return "Not measured yet with the confidence settings.\n\n" + note
    ratios = {
        "none": inference["ratio_b_confidence_none_over_a"],
        "arcs (default)": inference["ratio_b_over_a"],
        "matrix": inference["ratio_b_confidence_matrix_over_a"],
    }
    lines = ["| confidence | b/a |", "|---|---|"] + [f"| {name} | {ratio:.3f} |" for name, ratio in ratios.items()]
    return "\n".join(lines) + "\n\n" + note


def arc_objectives_block(results: Results) -> str:
    """Dev UAS/LAS (no punctuation) of the two arc objectives trained on the same config, budget and seed."""
    sources = [(path, "parser") for path in OBJECTIVE_FILES.values()]
    note = source_note(results, sources, "python -m spacy project run compare-objectives")
    scores = {name: results.json(path) for name, path in OBJECTIVE_FILES.items()}
    if any(value is None for value in scores.values()):
        return note
    lines = ["| arc_objective | dev UAS | dev LAS |", "|---|---|---|"]
    for name, result in scores.items():
        lines.append(f"| {name} | {100 * result['scores']['dep_uas']:.2f} | {100 * result['scores']['dep_las']:.2f} |")
    return "\n".join(lines) + "\n\n" + note
