"""results/precision.md: float32 against bfloat16, from the files bench/precision.py,
bench/precision_accuracy.py and bench/run_cost.py write (docs/performance.md#precision shows it).

    python bench/precision_table.py --speed results/bench_precision.json \
        --parse minilm=results/precision/parse_minilm_float32_model.json \
        --training minilm:float32=results/precision/parse_minilm_float32_model.json,\
results/precision/train_minilm_float32_cost.json \
        --output results/precision.md
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from ud_pipeline_speed import named_path  # noqa: E402

from spacy_pairatt.reporting.json_files import write_text  # noqa: E402


def read(path: str) -> Dict:
    return json.loads(Path(path).read_text(encoding="utf8"))


def speed_rows(speed: Dict) -> List[str]:
    rows = [
        "| pipeline | input | float32 words/s | bfloat16 words/s | ratio of medians | median paired ratio | "
        "transformer alone (paired) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, entry in speed["parsing"].items():
        alone = entry.get("transformer_alone")
        alone_ratio = f"{alone['median_paired_ratio']:.2f}" if alone else "–"
        rows.append(
            f"| {name} (`{entry['source']}`) | {entry['input']} | {entry['per_second']['float32']:,.0f} | "
            f"{entry['per_second']['bfloat16']:,.0f} | {entry['ratio_of_medians']:.2f} | "
            f"{entry['median_paired_ratio']:.2f} | {alone_ratio} |"
        )
    return rows


def training_step_rows(speed: Dict) -> List[str]:
    steps = {k: v for k, v in speed["training_step"].items() if isinstance(v, dict)}
    if not steps:
        return []
    rows = [
        f"\nOne `nlp.update` on {speed['training_step']['batch_sentences']} EWT training sentences "
        f"({speed['training_step']['repeats']} rounds):\n",
        "| config | float32 s/step | bfloat16 s/step | median paired ratio |",
        "|---|---|---|---|",
    ]
    for name, entry in steps.items():
        f32, bf16 = (1 / entry["per_second"][p] for p in ("float32", "bfloat16"))
        rows.append(f"| `{name}.cfg` | {f32:.2f} | {bf16:.2f} | {entry['median_paired_ratio']:.2f} |")
    return rows


def parse_rows(parses: List[Tuple[str, str]]) -> List[str]:
    rows = [
        "| model | split | UAS float32 | UAS bfloat16 | LAS float32 | LAS bfloat16 | heads agree | "
        "head_prob ECE float32 / bfloat16 | dep_prob ECE float32 / bfloat16 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, path in parses:
        result = read(path)
        for split in result["scores"]["float32"]:
            f32, bf16 = result["scores"]["float32"][split], result["scores"]["bfloat16"][split]
            if split == "test":
                cal = {p: result["calibration"][p]["test_float32_temperatures"] for p in ("float32", "bfloat16")}
                ece = " | ".join(
                    f"{cal['float32'][key]:.4f} / {cal['bfloat16'][key]:.4f}"
                    for key in ("head_prob_ece", "dep_prob_ece")
                )
            else:
                ece = "– | –"
            rows.append(
                f"| {name} | {split} | {100 * f32['uas']:.2f} | {100 * bf16['uas']:.2f} | {100 * f32['las']:.2f} | "
                f"{100 * bf16['las']:.2f} | {100 * result['head_agreement'][split]:.2f}% | {ece} |"
            )
    return rows


def training_rows(trainings: List[Tuple[str, str]]) -> List[str]:
    rows = [
        "| encoder | trained in | dev UAS | dev LAS | test UAS | test LAS | wall (min) | CPU (min) | peak RSS (MB) "
        "| code |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, files in trainings:
        encoder, precision = name.split(":")
        parse_path, cost_path = files.split(",")
        scores, cost = read(parse_path)["scores"][precision], read(cost_path)
        rows.append(
            f"| {encoder} | {precision} | {100 * scores['dev']['uas']:.2f} | {100 * scores['dev']['las']:.2f} | "
            f"{100 * scores['test']['uas']:.2f} | {100 * scores['test']['las']:.2f} | "
            f"{cost['wall_seconds'] / 60:.0f} | {cost['cpu_seconds'] / 60:.0f} | {cost['peak_rss_mb']:,.0f} | "
            f"{cost['provenance']['code']['commit'][:7]} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speed", help="bench/precision.py's JSON")
    parser.add_argument(
        "--parse",
        type=named_path,
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="bench/precision_accuracy.py's JSON of one trained model",
    )
    parser.add_argument(
        "--training",
        type=named_path,
        action="append",
        default=[],
        metavar="ENCODER:PRECISION=PARSE,COST",
        help="a model trained in PRECISION: its precision_accuracy JSON and its run_cost JSON",
    )
    parser.add_argument("--output", default="results/precision.md")
    args = parser.parse_args()
    parts = ["# float32 against bfloat16 (python bench/precision_table.py)"]
    if args.speed:
        speed = read(args.speed)
        parts += [
            f"\n## Speed\n\nEWT test, {speed['torch_threads']} torch threads, "
            f"native bfloat16: {speed['native_bfloat16']} "
            f"({speed['repeats']} rounds in alternating order; ratios: bfloat16 over float32 words/s):\n",
            *speed_rows(speed),
            *training_step_rows(speed),
        ]
    if args.parse:
        parts += [
            "\n## One trained model parsed in both precisions\n",
            "ECE on test with the temperatures fitted on dev in float32.\n",
            *parse_rows(args.parse),
        ]
    if args.training:
        parts += [
            "\n## Trained in bfloat16 against float32\n",
            "Same config and seed; each model scored in the precision it was trained in.\n",
            *training_rows(args.training),
        ]
    write_text(args.output, "\n".join(parts) + "\n")
    print(Path(args.output).read_text(encoding="utf8"))


if __name__ == "__main__":
    main()
