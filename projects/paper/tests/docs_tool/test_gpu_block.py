"""docs/performance.md's `gpu` block: the figures of bench-gpu's files (results/gpu/), rounded from what the
files hold, and "not measured yet" on a checkout without them (a session without a GPU)."""

import json

import pytest

from docs_build import results
from docs_build.plan import BLOCKS
from docs_build.results import CodeChange, Results
from tests.conftest import REPO

gpu_block = BLOCKS["gpu"]  # the figures, then their source note
GPU_FILES = gpu_block.sources(Results(REPO))  # training cost, test scores, speed


def test_the_block_prints_the_figures_of_the_gpu_files():
    if not all((REPO / path).exists() for path, _ in GPU_FILES):
        pytest.skip("no bench-gpu results in this checkout")
    cost, test, speed = (json.loads((REPO / path).read_text(encoding="utf8")) for path, _ in GPU_FILES)
    block = gpu_block(Results(REPO))

    steps = test["model_config"]["max_steps"]
    assert f"Device: {speed['machine']['gpu']}," in block
    assert f"torch threads {speed['machine']['torch_threads']}" in block
    assert f"{steps} steps in {cost['wall_seconds']:,.0f} s, {cost['wall_seconds'] / steps:.2f} s/step" in block
    assert f"peak RSS {cost['peak_rss_mb']:,.0f} MB" in block
    assert f"peak GPU memory in use {cost['gpu_peak_used_mb']:,} MiB" in block
    scores = test["scores"]
    assert f"UAS {100 * scores['dep_uas']:.1f}, LAS {100 * scores['dep_las']:.1f}; a single run" in block
    medians, inference = speed["inference"]["median_words_per_second"], speed["inference"]
    for key, row in (("a_transformer", "(a)"), ("b_pairatt", "(b)"), ("c_transition", "(c)")):
        assert any(line.startswith(f"| {row} ") and f"| {medians[key]:.0f} |" in line for line in block.splitlines())
    assert f"| {medians['c_transition_wordpiece_batched']:.0f} |" in block
    assert f"| b/a ≥ 0.90 (confidence arcs, the default) | {inference['ratio_b_over_a']:.3f} |" in block
    assert f"| b/c' ≥ 0.85 | {inference['ratio_b_over_c_wordpiece_batched']:.2f} |" in block
    training = speed["training"]
    seconds = training["median_seconds_per_step"]
    assert f"{training['ratio_pairatt_over_tagger']:.2f} ({seconds['pairatt_parser']:.2f} s vs" in block
    assert f"Weights: {speed['weights']}." in block
    assert "Profile of (b)" not in block  # cProfile's stages mislead on a GPU
    assert "Source: " + ", ".join(f"`{path}`" for path, _ in GPU_FILES) in block
    assert "not measured yet" not in block


def test_without_the_files_the_block_says_not_measured_yet(tmp_path):
    block = gpu_block(Results(tmp_path))

    assert block.startswith("*not measured yet: " + ", ".join(f"`{path}`" for path, _ in GPU_FILES))
    assert "UAS" not in block and "s/step" not in block


def test_a_parser_change_makes_the_training_files_stale_and_names_the_command(tmp_path, monkeypatch):
    """Training cost and test scores are pairatt_parser results; the speed file is a bench result."""
    if not all((REPO / path).exists() for path, _ in GPU_FILES):
        pytest.skip("no bench-gpu results in this checkout")
    for path, _ in GPU_FILES:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((REPO / path).read_text(encoding="utf8"), encoding="utf8")
    (tmp_path / "configs").mkdir()  # the training's steps: its config's
    (tmp_path / "configs" / "parser_minilm.cfg").write_text((REPO / "configs" / "parser_minilm.cfg").read_text())
    later = CodeChange("2100-01-01T00:00:00+00:00", "abc1234", "a parser change", frozenset({"parser"}))
    monkeypatch.setattr(results, "CODE_CHANGES", (later,))

    block = gpu_block(Results(tmp_path))

    stale = ", ".join(f"`{path}`" for path, kind in GPU_FILES if kind == "parser")
    assert f"**Stale** ({stale}): made before a parser change" in block
    assert "re-run: `python -m spacy project run bench-gpu projects/paper --vars.gpu_id 0`" in block
    assert "| (b) transformer + pairatt_parser |" in block  # bench/table.py renders the speed
