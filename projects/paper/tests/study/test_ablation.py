"""The Table 1 ablation: row commands, the table and orderings from constructed evaluation JSON,
and evaluate's decoder override on a tiny saved pipeline."""

import hashlib
import json

import pytest
import spacy
from spacy.tokens import DocBin
from thinc.api import fix_random_seed

from pairatt_paper.ablation import (
    EMBEDDINGS_ONLY,
    ROWS,
    ROWS_BY_KEY,
    config_learn_rate,
    run_ablation,
    select_rows,
    train_command,
)
from pairatt_paper.ablation_table import ablation_table, ordering_verdict, verdict_text, write_ablation_table
from pairatt_paper.bootstrap import f_score
from pairatt_paper.cli import main as study_main
from spacy_pairatt.cli import main
from tests.conftest import UD_DIR, examples_from_docs, make_pipeline, read_conllu_sentences

PAPER_FIGURES = ("62.1", "55.5", "77.2", "68.3", "76.9", "67.4", "87.8", "86.0", "89.3", "87.8", "90.9", "88.9")


def write_result(folder, name, uas, las=None, trees=1.0):
    folder.mkdir(parents=True, exist_ok=True)
    scores = {"dep_uas": uas, "dep_las": las, "dep_single_tree": trees}
    (folder / name).write_text(json.dumps({"scores": scores}), encoding="utf8")


def write_training(folder, training, seconds=12.5, learn_rate=1e-3, seed=0):
    folder.mkdir(parents=True, exist_ok=True)
    record = {"encoder": "all-MiniLM-L6-v2", "steps": 40, "seed": seed, "learn_rate": learn_rate, "seconds": seconds}
    (folder / f"{training}_train.json").write_text(json.dumps(record), encoding="utf8")


@pytest.fixture
def results_dir(tmp_path):
    """EWT: attention helps feature-based (0.70 > 0.60), not fine-tuning (0.80 < 0.85), MST row
    missing; PTB: ft:emb only."""
    ewt = tmp_path / "ewt"
    test_uas = {"fea_emb": 0.60, "fea_emb_att": 0.70, "ft_emb": 0.85, "ft_emb_att": 0.80, "transition": 0.83}
    for key, uas in test_uas.items():
        write_training(ewt, ROWS_BY_KEY[key].training)
        write_result(ewt, f"{key}_dev.json", uas - 0.01, uas - 0.05)
        write_result(ewt, f"{key}_test.json", uas, uas - 0.04, trees=0.9)
    write_training(tmp_path / "ptb", "ft_emb")
    write_result(tmp_path / "ptb", "ft_emb_test.json", 0.75, 0.75)
    return tmp_path


def test_ordering_verdicts_true_false_and_missing():
    assert ordering_verdict(80.0, 70.0) == {"verdict": "holds", "difference": 10.0}
    assert ordering_verdict(70.0, 70.0)["verdict"] == "does not hold"
    assert ordering_verdict(60.0, 70.0) == {"verdict": "does not hold", "difference": -10.0}
    assert ordering_verdict(None, 70.0) == {"verdict": "not measured", "difference": None}


def test_verdict_text_says_when_the_interval_spans_zero():
    verdict = {"verdict": "holds", "difference": 0.36}
    spanning = {**verdict, "bootstrap": {"low": -0.09, "high": 0.81, "p_not_better": 0.059}}
    clear = {**verdict, "bootstrap": {"low": 0.1, "high": 0.81, "p_not_better": 0.001}}
    assert verdict_text(verdict) == "holds (+0.36)"
    assert verdict_text(spanning).startswith("holds, within the test set's noise (+0.36; 95% interval -0.09 to +0.81")
    assert verdict_text(clear) == "holds (+0.36; 95% interval +0.10 to +0.81, p = 0.001)"


def test_orderings_from_results(results_dir):
    table = ablation_table(results_dir)
    verdicts = {entry["claim"]: entry for entry in table["orderings"]}
    for metric in ("uas", "las"):
        paper = [entry["paper"][metric] for entry in table["orderings"]]
        assert [verdict["verdict"] for verdict in paper] == ["holds"] * 3 + ["does not hold", "not measured"]
    # fea:ptb:emb+att against fea:emb+att: 76.9 / 67.4 against 77.2 / 68.3
    assert [entry["paper"]["las"]["difference"] for entry in table["orderings"]][3] == pytest.approx(-0.9)
    assert verdicts["MLM adaptation helps feature-based"]["paper"]["uas"]["difference"] == pytest.approx(-0.3)
    fea, ft = verdicts["attention helps feature-based"]["ewt"], verdicts["attention helps fine-tuning"]["ewt"]
    for metric in ("uas", "las"):
        assert fea[metric]["verdict"] == "holds" and fea[metric]["difference"] == pytest.approx(10.0)
    assert ft["uas"]["verdict"] == "does not hold" and ft["uas"]["difference"] == pytest.approx(-5.0)
    assert verdicts["MST helps"]["ewt"]["uas"]["verdict"] == "not measured"
    # the PTB sample has no labels: its orderings are on UAS alone
    assert {metric for entry in table["orderings"] for metric in entry["ptb"]} == {"uas"}
    assert {entry["ptb"]["uas"]["verdict"] for entry in table["orderings"]} == {"not measured"}


def test_rows_hold_percentages_and_las_only_on_labelled_data(results_dir):
    table = ablation_table(results_dir)
    ewt = {row["key"]: row for row in table["datasets"]["ewt"]["rows"]}
    assert ewt["fea_emb_att"]["test"] == pytest.approx({"uas": 70.0, "las": 66.0, "trees": 90.0})
    assert ewt["fea_emb_att"]["train_seconds"] == 12.5 and ewt["fea_emb_att"]["steps"] == 40
    assert ewt["ft_emb_att_mst"]["test"] is None and ewt["ft_emb_att_mst"]["decoder"] == "mst"
    # the MST row shares ft:emb+att's training record
    assert ewt["ft_emb_att_mst"]["train_seconds"] == 12.5
    ptb = {row["key"]: row for row in table["datasets"]["ptb"]["rows"]}
    assert ptb["ft_emb"]["test"]["las"] is None
    assert ptb["fea_emb"]["encoder"] is None


def test_scores_are_rounded_once_as_they_are_printed(tmp_path):
    """90.251 prints as 90.3 (not 90.25, then 90.2); 86.054 - 85.956 as +0.10 (not 86.05 - 85.96 = +0.09);
    the JSON keeps the exact scores and differences."""
    ptb = tmp_path / "ptb"
    for key, uas in (("ft_emb", 0.85956), ("ft_emb_att", 0.86054), ("ft_emb_att_mst", 0.90251)):
        write_training(ptb, ROWS_BY_KEY[key].training)
        write_result(ptb, f"{key}_test.json", uas)
    (tmp_path / "ewt").mkdir()
    table = ablation_table(tmp_path)
    rows = {row["key"]: row for row in table["datasets"]["ptb"]["rows"]}
    assert rows["ft_emb_att_mst"]["test"]["uas"] == 100 * 0.90251
    orderings = {entry["claim"]: entry["ptb"]["uas"] for entry in table["orderings"]}
    assert orderings["attention helps fine-tuning"]["difference"] == pytest.approx(0.098)
    assert orderings["MST helps"]["difference"] == pytest.approx(90.251 - 86.054)
    text = write_ablation_table(str(tmp_path), None, None)
    assert "| 90.3 | 100.0 |" in text and "90.2" not in text
    assert "does not hold (+0.09)" not in text and "| holds (+0.10) |" in text and "| holds (+4.20) |" in text


def test_markdown_and_json_have_every_row_and_the_papers_figures(results_dir, tmp_path):
    markdown, json_path = tmp_path / "out" / "ablation.md", tmp_path / "out" / "ablation.json"
    text = write_ablation_table(str(results_dir), str(markdown), str(json_path), "# Title")
    assert markdown.read_text(encoding="utf8") == text and text.startswith("# Title\n")
    ewt_part, ptb_part = text.split("## PTB sample")
    for part in (ewt_part, ptb_part):
        for row in ROWS:
            assert f"| {row.name} |" in part
        for figure in PAPER_FIGURES:
            assert f"| {figure} |" in part
    assert "| dev UAS | dev LAS | test UAS | test LAS |" in ewt_part
    assert "| dev UAS | test UAS | test trees |" in ptb_part and "test LAS" not in ptb_part
    fea_emb_att = "| fea:emb+att | all-MiniLM-L6-v2 | greedy | 40 | 0 | 0.001 | 12 | 69.0 | 65.0 | 70.0 | 66.0 | 90.0 |"
    assert fea_emb_att in text
    assert "| fea:emb | not run |" in ptb_part
    uas_part, las_part = text.split("## Orderings")[1].split("### LAS")
    fine_tuning = "| attention helps fine-tuning | ft:emb+att > ft:emb |"
    assert f"{fine_tuning} holds (+1.50) | does not hold (-5.00) | not measured |" in uas_part
    assert "| claim | comparison | paper | ewt |\n" in las_part and "ptb" not in las_part
    assert f"{fine_tuning} holds (+1.80) | does not hold (-5.00) |" in las_part
    written = json.loads(json_path.read_text(encoding="utf8"))
    assert written.pop("provenance")["seed"] == 0 and written == ablation_table(results_dir)


def write_seed_replicate(folder, seed, test_uas):
    """A results folder with the EWT rows in `test_uas` trained under `seed` (test LAS 4 points lower)."""
    for key, uas in test_uas.items():
        write_training(folder / "ewt", ROWS_BY_KEY[key].training, seed=seed)
        write_result(folder / "ewt", f"{key}_test.json", uas, uas - 0.04)
    return folder


def test_seed_spread_sets_each_seeds_difference_side_by_side(results_dir, tmp_path):
    """Seed 0 (the fixture): ft:emb+att 5 points behind ft:emb; seed 1: 2 points ahead. Comparisons
    run under one seed only (attention in the feature-based rows) are not listed."""
    seed1 = write_seed_replicate(tmp_path / "seed1", 1, {"ft_emb": 0.84, "ft_emb_att": 0.86})
    spread = ablation_table(results_dir, [seed1])["seed_spread"]
    assert [(entry["claim"], entry["dataset"], entry["metric"]) for entry in spread] == [
        ("attention helps fine-tuning", "ewt", "uas"),
        ("attention helps fine-tuning", "ewt", "las"),
    ]
    uas = spread[0]
    assert [(run["seed"], run["difference"]) for run in uas["runs"]] == [(0, -5.0), (1, 2.0)]
    assert [(run["better"], run["worse"]) for run in uas["runs"]] == [(80.0, 85.0), (86.0, 84.0)]
    assert uas["mean"] == -1.5 and uas["holds_in_every_seed"] is False
    text = write_ablation_table(str(results_dir), None, None, replicates=[str(seed1)])
    by_seed = "seed 0: -5.00 (80.00 vs 85.00); seed 1: +2.00 (86.00 vs 84.00)"
    row = f"| ft:emb+att > ft:emb | ewt | UAS | {by_seed} | -1.50 | no |"
    assert "## Orderings over training seeds" in text and f"| attention helps fine-tuning {row}" in text
    assert ablation_table(results_dir)["seed_spread"] == []
    assert "## Orderings over training seeds" not in write_ablation_table(str(results_dir), None, None)


def test_seed_spread_refuses_folders_that_mix_or_repeat_seeds(results_dir, tmp_path):
    with pytest.raises(ValueError, match="results folder .*missing does not exist"):
        ablation_table(results_dir, [tmp_path / "missing"])
    repeated = write_seed_replicate(tmp_path / "again", 0, {"ft_emb": 0.84, "ft_emb_att": 0.86})
    with pytest.raises(ValueError, match="both hold seed 0 of ewt ft_emb_att"):
        ablation_table(results_dir, [repeated])
    mixed = write_seed_replicate(tmp_path / "mixed", 1, {"ft_emb": 0.84})
    write_seed_replicate(mixed, 2, {"ft_emb_att": 0.86})
    with pytest.raises(ValueError, match="ft_emb_att was trained with seed 2, ft_emb with seed 1"):
        ablation_table(results_dir, [mixed])
    with pytest.raises(SystemExit, match="ablation-table: error: results folder"):
        study_main(["ablation-table", "--results-dir", str(results_dir), "--replicates", str(tmp_path / "missing")])


def test_train_commands_share_one_budget_and_differ_only_where_the_rows_do():
    def command(key, **kwargs):
        return train_command(ROWS_BY_KEY[key], "train.spacy", "dev.spacy", "out", 40, 3, 100, **kwargs)

    budget = ["--training.max_steps", "40", "--training.optimizer.learn_rate.total_steps", "40"]
    for row in ROWS:
        args = command(row.key, adapted_encoder="mlm_dir")
        assert args[:5] == ["python", "-m", "spacy", "train", row.config]
        assert all(" ".join(budget[i : i + 2]) in " ".join(args) for i in (0, 2))
        assert "--system.seed 3" in " ".join(args) and "--corpora.dev.limit 100" in " ".join(args)
        assert (" ".join(EMBEDDINGS_ONLY) in " ".join(args)) == (row.key in ("fea_emb", "ft_emb"))
        assert ("--components.pairatt_parser.decoder greedy" in " ".join(args)) == (row.key != "transition")
        assert ("--components.transformer.model.name mlm_dir" in " ".join(args)) == (row.key == "fea_mlm_emb_att")
    assert command("ft_emb_att") == command("ft_emb_att_mst")
    with pytest.raises(ValueError, match="adapted encoder"):
        command("fea_mlm_emb_att")
    with pytest.raises(ValueError, match="steps"):
        train_command(ROWS[0], "t", "d", "o", 0, 0)


def test_select_rows_keeps_table_order_and_names_unknown_rows():
    assert [row.key for row in select_rows(["ft_emb", "fea_emb"])] == ["fea_emb", "ft_emb"]
    assert select_rows(None) == list(ROWS)
    with pytest.raises(ValueError, match="ft_att"):
        select_rows(["ft_att"])


@pytest.fixture(scope="module")
def saved_parser(tiny_bert_dir, ud_train_docs, tmp_path_factory):
    """An untrained tiny pairatt pipeline saved as ft_emb_att's model-best, and 20 EWT dev sentences."""
    folder = tmp_path_factory.mktemp("saved_parser")
    fix_random_seed(0)
    nlp = make_pipeline(tiny_bert_dir)
    nlp.initialize(lambda: examples_from_docs(nlp, ud_train_docs[:20]))
    (folder / "training" / "ft_emb_att").mkdir(parents=True)
    nlp.to_disk(folder / "training" / "ft_emb_att" / "model-best")
    DocBin(docs=read_conllu_sentences(UD_DIR / "en_ewt-ud-dev.conllu", 20)).to_disk(folder / "dev.spacy")
    return folder


def test_evaluate_decoder_override(saved_parser, tmp_path):
    """An untrained parser decoded greedily leaves some sentences without one tree; MST never does."""
    model = str(saved_parser / "training" / "ft_emb_att" / "model-best")
    data, results = str(saved_parser / "dev.spacy"), {}
    for decoder in ("greedy", "mst"):
        output = tmp_path / f"{decoder}.json"
        main(["evaluate", model, data, "--decoder", decoder, "--output", str(output)])
        results[decoder] = json.loads(output.read_text())
    assert results["greedy"]["decoders"] == {"pairatt_parser": "greedy"}
    assert results["mst"]["decoders"] == {"pairatt_parser": "mst"}
    assert results["mst"]["scores"]["dep_single_tree"] == 1.0
    assert results["greedy"]["scores"]["dep_single_tree"] < 1.0
    # provenance: the model's config and training seed, this run's versions, command and time
    config = (saved_parser / "training" / "ft_emb_att" / "model-best" / "config.cfg").read_bytes()
    assert results["mst"]["model_config"]["config_sha256"] == hashlib.sha256(config).hexdigest()
    assert results["mst"]["model_config"]["seed"] == 0 and results["mst"]["provenance"]["seed"] == 0
    assert results["mst"]["provenance"]["versions"]["spacy"] == spacy.__version__
    assert results["mst"]["provenance"]["wall_seconds"] >= results["mst"]["seconds"]
    nlp = spacy.load(model)
    nlp.remove_pipe("pairatt_parser")
    nlp.to_disk(tmp_path / "encoder_only")
    with pytest.raises(SystemExit, match="no pairatt_parser"):
        main(["evaluate", str(tmp_path / "encoder_only"), data, "--decoder", "mst"])


def test_learn_rate_is_read_from_the_row_config(tmp_path):
    assert config_learn_rate(ROWS_BY_KEY["fea_emb"].config) == 1e-3
    assert config_learn_rate(ROWS_BY_KEY["ft_emb"].config) == 3e-4
    config = tmp_path / "constant.cfg"
    config.write_text("[training]\n\n[training.optimizer]\nlearn_rate = 0.02\n", encoding="utf8")
    assert config_learn_rate(str(config)) == 0.02


def test_score_only_rescoring_records_arc_counts_and_bootstrap_intervals(saved_parser, tmp_path):
    """Re-scoring a trained row writes test arc counts that sum to its dep_uas, and the table then
    gives the MST ordering a paired bootstrap interval (greedy and MST decode the same weights)."""
    data = str(saved_parser / "dev.spacy")
    results = tmp_path / "ewt"
    run_ablation(
        "ewt", data, data, data, str(saved_parser / "training"), str(results), steps=None,
        rows=["ft_emb_att", "ft_emb_att_mst"], train_models=False,
    )  # fmt: skip
    assert not (results / "ft_emb_att_train.json").exists()
    for key in ("ft_emb_att", "ft_emb_att_mst"):
        arcs = json.loads((results / f"{key}_test_arcs.json").read_text(encoding="utf8"))
        scores = json.loads((results / f"{key}_test.json").read_text(encoding="utf8"))["scores"]
        assert len(arcs["gold"]) == 20 and "arc_counts" not in scores
        totals = {name: sum(values) for name, values in arcs.items()}
        for metric in ("uas", "las"):
            f = f_score(totals[f"{metric}_correct"], totals[f"{metric}_predicted"], totals["gold"])
            assert f == pytest.approx(scores[f"dep_{metric}"])
    mst = {entry["claim"]: entry for entry in ablation_table(tmp_path)["orderings"]}["MST helps"]["ewt"]
    for metric in ("uas", "las"):
        interval = mst[metric]["bootstrap"]
        assert interval["n_docs"] == 20 and interval["low"] <= interval["difference"] <= interval["high"]
        assert interval["difference"] == pytest.approx(mst[metric]["difference"], abs=0.01)
        assert interval["within_noise"] is (interval["low"] <= 0 <= interval["high"])
    assert "; 95% interval" in write_ablation_table(str(tmp_path), None, None)
    write_ablation_table(str(tmp_path), None, str(tmp_path / "ablation.json"))
    assert json.loads((tmp_path / "ablation.json").read_text())["provenance"]["seed"] == 0
    assert json.loads((results / "ft_emb_att_test.json").read_text())["provenance"]["versions"]["thinc"]
    training = str(saved_parser / "training")
    with pytest.raises(ValueError, match="train row ft_emb first"):
        run_ablation("ewt", data, data, data, training, str(results), None, rows=["ft_emb"], train_models=False)
    splits = ["--train", data, "--dev", data, "--test", data, "--training-dir", training, "--results-dir", str(results)]
    with pytest.raises(SystemExit, match="--steps is required unless --score-only"):
        study_main(["ablation-run", "ewt", *splits, "--rows", "ft_emb"])


def test_a_training_records_the_commit_it_started_from(monkeypatch):
    """A checkout can move on during a long training: its record names the commit it started from."""
    from pairatt_paper import ablation
    from spacy_pairatt.reporting.provenance import provenance
    versions = iter([{"commit": "at start", "dirty": False, "dirty_paths": []}])

    def training_moves_the_checkout(*args, **kwargs):
        monkeypatch.setattr(ablation, "code_version", lambda: {"commit": "at end", "dirty": False, "dirty_paths": []})

    monkeypatch.setattr(ablation, "code_version", lambda: next(versions))
    monkeypatch.setattr(ablation.subprocess, "run", training_moves_the_checkout)
    _, _, code = ablation.run_training(["python", "-m", "spacy", "train", "config.cfg"])
    assert code["commit"] == "at start"
    assert provenance(code=code)["code"]["commit"] == "at start"
