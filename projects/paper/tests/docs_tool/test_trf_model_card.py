"""en_pairatt_trf's model card (`--tier ud_pipeline_trf`): its own results files' figures and its encoder, none of
the MiniLM tiers' bench or accuracy figures even where those files are there, and the UD pipelines' limits."""

import re
import shutil

import pytest
import srsly

from docs_build.__main__ import main
from docs_build.limits import MODEL_CARDS, model_card_notes
from docs_build.results import Results
from spacy_pairatt.evaluation.ud_eval import evaluate_files, write_results
from tests.conftest import PAPER, REPO, UD_DIR


def first_sentences(path, n: int) -> str:
    return "\n\n".join(path.read_text(encoding="utf8").split("\n\n")[:n]) + "\n\n"


def lemmas_as_forms(gold_text: str) -> str:
    """A system file whose every lemma is its form: Lemmas F1 well below gold's 100."""
    rows = (line.split("\t") for line in gold_text.splitlines())
    return "\n".join("\t".join(c[:2] + [c[1]] + c[3:]) if len(c) == 10 else "\t".join(c) for c in rows) + "\n"


@pytest.fixture
def checkout(tmp_path):
    """A checkout with en_pairatt's committed card results (bench, accuracy) and en_pairatt_trf's test files as
    evaluate-pipeline-trf writes them (ud-eval on EWT dev sentences)."""
    for path in {path for path, _ in MODEL_CARDS["ud_pipeline"].sources(Results(REPO))}:
        if (REPO / path).exists():
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / path, tmp_path / path)
    gold, system = tmp_path / "gold.conllu", tmp_path / "system.conllu"
    gold.write_text(first_sentences(UD_DIR / "en_ewt-ud-dev.conllu", 20), encoding="utf8")
    system.write_text(lemmas_as_forms(gold.read_text(encoding="utf8")), encoding="utf8")
    scores = evaluate_files(gold, system)
    for name in ("test_gold_tokens", "test_raw_text"):
        write_results(scores, gold, system, tmp_path / f"results/ud_pipeline_trf_{name}.json")
    return tmp_path, scores


def test_the_trf_card_gives_its_own_figures_and_encoder(checkout):
    root, scores = checkout
    card, minilm_card = model_card_notes(root, "ud_pipeline_trf"), model_card_notes(root, "ud_pipeline")
    assert "fine-tuned from all-mpnet-base-v2 (Apache 2.0)" in card and "MiniLM" not in card
    lemmas = f"{100 * scores['Lemmas'].f1:.1f}"
    assert f"Lemmas {lemmas}, UAS {100 * scores['UAS'].f1:.1f}" in card  # Measured: gold tokens and raw text
    assert "results/ud_pipeline_trf_test_gold_tokens.json" in card
    assert "results/ud_pipeline_test_gold_tokens.json" not in card
    assert f"Lemmas {lemmas}, UAS" not in minilm_card  # en_pairatt's card keeps its own file's


def test_the_trf_card_states_no_minilm_measured_figure_and_the_ud_pipelines_limits(checkout):
    root, _ = checkout
    card, minilm_card = model_card_notes(root, "ud_pipeline_trf"), model_card_notes(root, "ud_pipeline")
    minilm_measured = minilm_card.split("### Measured", 1)[1].split("### Limits", 1)[0]
    for line in filter(None, minilm_measured.splitlines()):
        assert line not in card, line
    trf_limits = card.split("### Limits", 1)[1]
    assert trf_limits == minilm_card.split("### Limits", 1)[1]
    assert "English web text only" in trf_limits and "Predicts sentences" in trf_limits


def test_the_docs_tool_writes_the_trf_card_for_assemble(checkout, tmp_path):
    root, _ = checkout
    main(["--root", str(root), "--model-card", str(tmp_path / "notes.md"), "--tier", "ud_pipeline_trf"])
    assert (tmp_path / "notes.md").read_text(encoding="utf8") == model_card_notes(root, "ud_pipeline_trf")


def test_each_model_card_command_names_a_tier_the_docs_tool_writes():
    """The paper project's model-card commands, as `package`, `package-parser` and `package-trf` run them."""
    lines = [line for command in srsly.read_yaml(PAPER / "project.yml")["commands"]
             for line in command.get("script", []) if "--model-card" in line]  # fmt: skip
    tiers = [re.search(r"--tier (\S+)", line)[1] if "--tier" in line else "ud_pipeline" for line in lines]
    assert sorted(tiers) == sorted(MODEL_CARDS)
