"""The tier table (`tiers` block; README and both UD pipelines' model cards): each pipeline's row from its
own ud-eval files, bench/tiers.py's entry and training cost, the same section in en_pairatt's and
en_pairatt_trf's cards, none in the parser's, and none while a file is missing."""

import json

import pytest

from docs_build.limits import model_card_notes
from docs_build.plan import BLOCKS
from docs_build.results import Results
from spacy_pairatt.evaluation.ud_eval import evaluate_files, write_results
from tests.conftest import UD_DIR

TIERS = {"en_pairatt": (20, "float32", 1450.0, 620.0), "en_pairatt_trf": (40, "auto", 180.0, 410.0)}


def system_with_wrong_labels(gold_text: str, every: int) -> str:
    """Every `every`-th word's relation changed: LAS below gold's 100, different for each tier."""
    lines, word = [], 0
    for line in gold_text.splitlines():
        columns = line.split("\t")
        if len(columns) == 10 and columns[0].isdigit():
            word += 1
            if word % every == 0:
                columns[7] = "dep" if columns[7].split(":")[0] != "dep" else "nmod"
        lines.append("\t".join(columns))
    return "\n".join(lines) + "\n"


@pytest.fixture
def checkout(tmp_path):
    """Both tiers' test files as evaluate-pipeline(-trf) writes them (ud-eval over 30 EWT dev sentences, a tier's
    relations wrong every few words) and bench/tiers.py's results file."""
    gold = tmp_path / "gold.conllu"
    gold.write_text("\n\n".join((UD_DIR / "en_ewt-ud-dev.conllu").read_text("utf8").split("\n\n")[:30]) + "\n\n")
    stem = {"en_pairatt": "ud_pipeline", "en_pairatt_trf": "ud_pipeline_trf"}
    las, bench = {}, {"words": 512, "torch_threads": 2, "repeats": 3, "native_bfloat16": True, "tiers": {}}
    for name, (every, precision, f32, bf16) in TIERS.items():
        system = tmp_path / f"{name}.conllu"
        system.write_text(system_with_wrong_labels(gold.read_text("utf8"), every), encoding="utf8")
        scores = evaluate_files(gold, system)
        las[name] = 100 * scores["LAS"].f1
        for split in ("test_raw_text", "test_gold_tokens"):
            write_results(scores, gold, system, tmp_path / f"results/{stem[name]}_{split}.json")
        rates = {"float32": f32, "bfloat16": bf16}
        bench["tiers"][name] = {"precision": precision, "per_second": rates, "parse_peak_rss_mb": 2345.6,
                                "disk_bytes": 456_700_000}  # fmt: skip
        cost = {"command": "python -m spacy_pairatt train-resumable configs/x.cfg", "steps": [0, 800],
                "wall_seconds": every * 360.0, "peak_rss_mb": 10_797.3, "provenance": {"cores": 2}}  # fmt: skip
        (tmp_path / f"results/train_{stem[name]}_cost.json").write_text(json.dumps(cost), encoding="utf8")
    stage3 = {**cost, "wall_seconds": 1800.0, "peak_rss_mb": 3_500.0}  # en_pairatt_trf's lemmatizer
    (tmp_path / "results/train_lemmatizer_trf_cost.json").write_text(json.dumps(stage3), encoding="utf8")
    (tmp_path / "projects/paper/results").mkdir(parents=True)
    (tmp_path / "projects/paper/results/bench_tiers.json").write_text(json.dumps(bench), encoding="utf8")
    return tmp_path, las


def test_each_tier_has_its_own_row_and_both_ud_cards_the_same_section(checkout):
    root, las = checkout
    block = BLOCKS["tiers"](Results(root))
    table = [line.split(" | ") for line in block.splitlines() if line.startswith("| `")]
    rows = {cells[0].strip("| `"): cells for cells in table}
    assert list(rows) == ["en_pairatt", "en_pairatt_trf"]
    for name, (_, precision, f32, bf16) in TIERS.items():
        assert rows[name][5:10] == [f"{las[name]:.2f}", f"{las[name]:.2f}", f"{f32:,.0f}", f"{bf16:,.0f}", precision]
        assert rows[name][10:] == ["2.3", "457 |"]
    assert las["en_pairatt"] != las["en_pairatt_trf"]
    trainings = "`en_pairatt` 800 steps in 2.0 h on 2 CPU cores, peak RSS 10.8 GB; `en_pairatt_trf` 800 steps in 4.0 h"
    assert trainings in block
    assert "`en_pairatt_trf's lemmatizer (stage 3)` 800 steps in 0.5 h on 2 CPU cores, peak RSS 3.5 GB" in block
    cards = {tier: model_card_notes(root, tier) for tier in ("ud_pipeline", "ud_pipeline_trf", "parser")}
    section = cards["ud_pipeline"].split("### en_pairatt and en_pairatt_trf", 1)[1].split("### Measured")[0]
    assert block.strip() in section and section in cards["ud_pipeline_trf"]
    assert "### en_pairatt and en_pairatt_trf" not in cards["parser"]


def test_no_tier_section_in_a_card_while_a_tier_is_not_measured(checkout):
    root, _ = checkout
    (root / "results/ud_pipeline_trf_test_gold_tokens.json").unlink()
    assert "### en_pairatt and en_pairatt_trf" not in model_card_notes(root, "ud_pipeline")
    assert "not measured yet: `results/ud_pipeline_trf_test_gold_tokens.json`" in BLOCKS["tiers"](Results(root))
