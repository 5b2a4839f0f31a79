"""encoders-table: rows from the runs' own result files, runs not made yet listed as not run, and the
MPNet attention comparison by paired bootstrap over the seeds both runs have."""

import json
import shutil

import numpy as np
import pytest

from pairatt_paper.cli import main
from pairatt_paper.encoders_table import ENCODER_RUNS, encoders_markdown, encoders_table
from tests.conftest import PAPER, REPO

MINILM_FILES = ("pairatt_dev.json", "pairatt_test.json", "train_pairatt_cost.json", "bench_speed.json")


@pytest.fixture
def results_dir(tmp_path):
    """A results folder with the MiniLM run's committed files and nothing of MPNet."""
    folder = tmp_path / "results"
    folder.mkdir()
    for name in MINILM_FILES:
        committed = [path for path in (REPO / "results" / name, PAPER / "results" / name) if path.exists()]
        shutil.copy(committed[0], folder / name)  # bench_speed.json is the paper's, the rest the user workflow's
    return folder


def arc_counts(correct_share: float, n_docs: int = 60, seed: int = 0):
    """Per-document arc counts on one fixed test set, of a parser (trained under `seed`) that gets
    about `correct_share` of the arcs right."""
    gold = np.random.default_rng(0).integers(5, 30, n_docs)
    rng = np.random.default_rng(1 + seed)
    correct = np.minimum(gold, rng.binomial(gold, correct_share))
    labelled = np.minimum(correct, rng.binomial(correct, 0.95))
    return {
        "gold": gold.tolist(),
        "uas_correct": correct.tolist(),
        "uas_predicted": gold.tolist(),
        "las_correct": labelled.tolist(),
        "las_predicted": gold.tolist(),
    }


def write(folder, name, data):
    (folder / name).write_text(json.dumps(data), encoding="utf8")


def test_the_minilm_row_comes_from_its_files_and_mpnet_rows_are_not_run(results_dir):
    table = encoders_table(results_dir, resamples=200)
    minilm, mpnet, mpnet_emb = table["rows"]
    test = json.loads((results_dir / "pairatt_test.json").read_text())["scores"]
    speed = json.loads((results_dir / "bench_speed.json").read_text())["inference"]
    assert minilm["status"] == "run" and minilm["missing"] == []
    assert minilm["test"] == {"uas": 100 * test["dep_uas"], "las": 100 * test["dep_las"]}
    assert minilm["b_over_a"] == speed["ratio_b_over_a"]
    assert minilm["words_per_s"] == speed["median_words_per_second"]["b_pairatt"]
    for row in (mpnet, mpnet_emb):
        assert row["status"] == "not run" and row["test"] is None and row["training_wall_s"] is None
    assert mpnet["ft_emb_vs_emb_att"]["status"] == "not run"
    assert "results/mpnet_test_arcs.json" in mpnet["ft_emb_vs_emb_att"]["needs"]
    markdown = encoders_markdown(table)
    assert markdown.count("not run") == 3 and "| all-MiniLM-L6-v2 | `parser_minilm.cfg` | yes |" in markdown


def test_the_attention_comparison_pools_the_seeds_both_runs_have(results_dir):
    for seed in (0, 1):
        suffix = "" if seed == 0 else f"_seed{seed}"
        write(results_dir, f"mpnet{suffix}_test_arcs.json", arc_counts(0.92, seed=seed))
    write(results_dir, "mpnet_emb_test_arcs.json", arc_counts(0.80, seed=0))
    comparison = encoders_table(results_dir, resamples=300)["rows"][1]["ft_emb_vs_emb_att"]
    assert comparison["status"] == "run" and comparison["seeds"] == [0]
    low, high = comparison["interval"]
    assert 0 < low <= comparison["difference"] <= high
    write(results_dir, "mpnet_emb_seed1_test_arcs.json", arc_counts(0.80, seed=1))
    comparison = encoders_table(results_dir, resamples=300)["rows"][1]["ft_emb_vs_emb_att"]
    assert comparison["seeds"] == [0, 1] and len(comparison["by_seed"]) == 2
    assert "above 0" in encoders_markdown(encoders_table(results_dir, resamples=300))


def test_a_run_with_some_files_is_partly_run_and_shows_what_it_has(results_dir):
    shutil.copy(results_dir / "pairatt_dev.json", results_dir / ENCODER_RUNS[2].dev)
    row = encoders_table(results_dir, resamples=100)["rows"][2]
    assert row["status"] == "partly run" and row["dev"] is not None and row["test"] is None
    assert "results/mpnet_emb_test.json" in row["missing"]


def test_the_command_writes_the_json_and_the_table(results_dir, tmp_path):
    output_json, output_md = tmp_path / "encoders.json", tmp_path / "encoders.md"
    outputs = ["--output-json", str(output_json), "--output-md", str(output_md)]
    main(["encoders-table", "--results", str(results_dir), *outputs])
    table = json.loads(output_json.read_text())
    assert [row["config"] for row in table["rows"]] == [run.config for run in ENCODER_RUNS]
    assert "provenance" in table and output_md.read_text().startswith("| encoder |")


def test_a_run_stopped_early_shows_its_steps_and_why(results_dir):
    for name in (ENCODER_RUNS[1].dev, ENCODER_RUNS[1].test):
        shutil.copy(results_dir / "pairatt_test.json", results_dir / name)
    cost = {"wall_seconds": 600.0, "peak_rss_mb": 4000.0, "stopped_at_step": 600, "why_stopped": "out of time"}
    write(results_dir, ENCODER_RUNS[1].training_cost, cost)
    minilm, mpnet, _ = encoders_table(results_dir, resamples=200)["rows"]
    assert (minilm["steps"], minilm["stopped_early"]) == (800, None)  # parser_minilm.cfg's max_steps
    assert (mpnet["steps"], mpnet["planned_steps"], mpnet["stopped_early"]) == (600, 800, "out of time")
    markdown = encoders_markdown(encoders_table(results_dir, resamples=200))
    assert "| yes | 600* |" in markdown and "| yes | 800 |" in markdown
    assert "trained 600 of its 800 steps and scored at that checkpoint (out of time)" in markdown


def test_a_run_told_to_train_fewer_steps_shows_them(results_dir):
    """A `--training.max_steps` override in the command the cost file records is the run's budget."""
    command = "python -m spacy train configs/parser_mpnet_emb.cfg --output o --training.max_steps 600"
    write(results_dir, ENCODER_RUNS[2].training_cost, {"wall_seconds": 1.0, "peak_rss_mb": 1.0, "command": command})
    mpnet_emb = encoders_table(results_dir, resamples=200)["rows"][2]
    assert (mpnet_emb["steps"], mpnet_emb["planned_steps"]) == (600, 800)
    assert mpnet_emb["stopped_early"] == "`--training.max_steps 600` in its command"
