"""The attention curve: subsets, budgets and run commands, reuse of earlier results, the
table and picture from synthetic per-run JSON files, and one end-to-end run on the tiny random BERT."""

import dataclasses
import json
import subprocess

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin

from pairatt_paper.ablation import EMBEDDINGS_ONLY
from pairatt_paper.attention_curve import (
    REL_NO_ATTENTION,
    TASKS,
    Budget,
    Run,
    Setup,
    plan_runs,
    reusable,
    run_command,
    subset_indices,
    write_subsets,
)
from pairatt_paper.attention_curve_table import curve_table, training_device, verdict, write_curve_table
from pairatt_paper.cli import main
from spacy_pairatt.reporting.provenance import code_fingerprint
from tests.conftest import UD_DIR, read_conllu_sentences

# -- subsets, budgets, commands -----------------------------------------------------------------


def test_subsets_are_seeded_sorted_distinct_and_nested():
    small, large = subset_indices(1000, 100, seed=3), subset_indices(1000, 400, seed=3)
    assert np.array_equal(small, subset_indices(1000, 100, seed=3))
    assert not np.array_equal(small, subset_indices(1000, 100, seed=4))
    assert np.all(np.diff(small) > 0) and small[0] >= 0 and small[-1] < 1000
    assert set(small) <= set(large)  # one seed's subsets grow from one permutation
    assert len(subset_indices(50, 50, seed=0)) == 50
    for size in (0, 51):
        with pytest.raises(ValueError, match="cannot be drawn"):
            subset_indices(50, size, seed=0)


def docbin(path, words, tag):
    """Docs named by their position, each with user_data (as SemEval's ids and relations are)."""
    nlp = spacy.blank("en")
    docs = []
    for i, word in enumerate(words):
        doc = Doc(nlp.vocab, words=[tag, word])
        doc.user_data["position"] = i
        docs.append(doc)
    DocBin(store_user_data=True, docs=docs).to_disk(path)


def test_paired_sources_get_the_same_subset_with_user_data(tmp_path):
    words = [f"w{i}" for i in range(30)]
    docbin(tmp_path / "plain.spacy", words, "plain")
    docbin(tmp_path / "marked.spacy", words, "$")
    manifests = [
        write_subsets(str(tmp_path / f"{name}.spacy"), str(tmp_path / name), sizes=[5, 10], seeds=[0, 1])
        for name in ("plain", "marked")
    ]
    nlp = spacy.blank("en")
    for size in (5, 10):
        for seed in (0, 1):
            picked = []
            for name in ("plain", "marked"):
                path = tmp_path / name / f"n{size}_s{seed}.spacy"
                docs = list(DocBin(store_user_data=True).from_disk(path).get_docs(nlp.vocab))
                picked.append([doc.user_data["position"] for doc in docs])
                assert [doc[1].text for doc in docs] == [f"w{i}" for i in picked[-1]]
            assert picked[0] == picked[1] == subset_indices(30, size, seed).tolist()
    assert manifests[0]["n_source_docs"] == 30 and len(manifests[0]["subsets"]) == 4
    assert manifests[0]["source_sha256"] != manifests[1]["source_sha256"]
    written = json.loads((tmp_path / "plain" / "subsets.json").read_text())
    assert {(s["size"], s["seed"]) for s in written["subsets"]} == {(5, 0), (5, 1), (10, 0), (10, 1)}
    with pytest.raises(ValueError, match="does not exist"):
        write_subsets(str(tmp_path / "missing.spacy"), str(tmp_path / "x"), [5], [0])


def test_every_size_gets_the_full_data_budget_by_default():
    parser, relations = TASKS["parser"].budget, TASKS["relations"].budget
    assert {parser.steps(n) for n in (20, 100, 400, 1600, 6400, 12544)} == {800}
    assert {relations.steps(n) for n in (1000, 7200)} == {675}  # 675: the SemEval recipe's 3 epochs of 32
    assert parser.rule().startswith("800 steps at every size")


def test_budget_rule_scales_steps_with_size_between_floor_and_cap():
    scaled = Budget(1 / 8, 200, 800)
    assert [scaled.steps(n) for n in (20, 100, 1600, 1601, 6400, 12544)] == [200, 200, 200, 201, 800, 800]
    assert Budget(0.5, 1, 10).steps(7) == 4
    with pytest.raises(ValueError, match="at least one sentence"):
        scaled.steps(0)
    with pytest.raises(ValueError, match="min_steps <= max_steps"):
        Budget(1, 10, 5).steps(7)
    assert "at least 200, at most 800" in scaled.rule()


def test_plan_pairs_both_rows_at_each_size_and_seed():
    runs = plan_runs("parser", "ewt", ["emb", "att"], [100, None], [0, 1])
    assert [run.run_id for run in runs[:4]] == [
        "ewt_n100_s0_emb",
        "ewt_n100_s0_att",
        "ewt_n100_s1_emb",
        "ewt_n100_s1_att",
    ]
    assert runs[-1].run_id == "ewt_full_s1_att" and len(runs) == 8
    with pytest.raises(ValueError, match="unknown parser row 'ftat'"):
        plan_runs("parser", "ewt", ["ftat"], [100], [0])
    with pytest.raises(ValueError, match="unknown relations row 'ftatt'"):
        plan_runs("relations", "semeval", ["ftatt"], [100], [0])
    with pytest.raises(ValueError, match="at least one"):
        plan_runs("parser", "ewt", ["emb"], [], [0])


def test_rows_differ_only_in_attention_and_share_the_budget(tmp_path):
    setup = Setup("train.spacy", "dev.spacy", {"ewt": "test.spacy"}, "training", str(tmp_path))

    def command(task, row, **kwargs):
        return run_command(Run(task, "ewt", row, 100, 2), Setup(**{**setup.__dict__, **kwargs}), "sub.spacy", 200)

    emb, att = command("parser", "emb"), command("parser", "att")
    assert emb[: len(att)][:4] == att[:4] == ["python", "-m", "spacy", "train"]
    assert " ".join(emb) == " ".join(att).replace("ewt_n100_s2_att", "ewt_n100_s2_emb") + " " + " ".join(
        EMBEDDINGS_ONLY
    )
    assert "--system.seed 2" in " ".join(att) and "--training.max_steps 200" in " ".join(att)
    assert "decoder" not in " ".join(att)  # the config's decoder (MST), not the ablation's greedy one
    assert command("parser", "ftatt")[4] == "configs/parser_minilm_ftatt.cfg"
    assert " ".join(REL_NO_ATTENTION) in " ".join(command("relations", "emb"))
    assert " ".join(REL_NO_ATTENTION) not in " ".join(command("relations", "att"))
    assert command("parser", "att", encoder="tiny")[-2:] == ["--components.transformer.model.name", "tiny"]
    assert "--gpu-id 0" in " ".join(command("parser", "att", gpu_id=0))


# -- reuse --------------------------------------------------------------------------------------


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_code_fingerprint_follows_the_code_committed_or_not(tmp_path, tmp_path_factory):
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("__pycache__/\n")
    (tmp_path / "spacy_pairatt").mkdir()
    (tmp_path / "spacy_pairatt" / "x.py").write_text("a = 1\n")
    (tmp_path / "notes.md").write_text("notes\n")
    git(tmp_path, "add", ".")

    def fingerprint():
        return code_fingerprint(("spacy_pairatt", "setup.py"), tmp_path)

    first = fingerprint()
    assert first is not None and fingerprint() == first
    (tmp_path / "notes.md").write_text("more notes\n")  # outside the paths
    (tmp_path / "spacy_pairatt" / "__pycache__").mkdir()  # ignored by git
    (tmp_path / "spacy_pairatt" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert fingerprint() == first
    (tmp_path / "spacy_pairatt" / "x.py").write_text("a = 2\n")  # an edit, not committed
    assert fingerprint() != first
    (tmp_path / "spacy_pairatt" / "x.py").write_text("a = 1\n")
    assert fingerprint() == first
    (tmp_path / "spacy_pairatt" / "y.py").write_text("")  # a new file git would track
    assert fingerprint() != first
    assert code_fingerprint(("spacy_pairatt",), tmp_path_factory.mktemp("not_a_checkout")) is None


def test_reuse_policies():
    record = {"code_sha256": "abc"}
    assert reusable(record, "same-code", "abc") and not reusable(record, "same-code", "abd")
    assert not reusable(record, "same-code", None) and not reusable({}, "same-code", None)
    assert reusable(record, "existing", "abd") and not reusable(record, "never", "abc")
    assert not reusable(None, "existing", "abc")
    with pytest.raises(ValueError, match="reuse must be one of"):
        reusable(record, "sometimes", "abc")


# -- table and picture from synthetic runs ------------------------------------------------------


def arc_counts(correct, n_docs=40, gold=10):
    """Every gold arc predicted, `correct[d]` of them right: F = correct / gold."""
    return {
        "gold": [gold] * n_docs,
        "uas_correct": [int(c) for c in correct], "uas_predicted": [gold] * n_docs,
        "las_correct": [int(c) for c in correct], "las_predicted": [gold] * n_docs,
    }  # fmt: skip


def write_run(results, task, dataset, row, size, n_train, seed, test, arcs=None):
    """One run's record as `run_curve` writes it (scores in percent) and its arc counts."""
    run_id = f"{dataset}_{'full' if size is None else f'n{size}'}_s{seed}_{row}"
    (results / "runs").mkdir(parents=True, exist_ok=True)
    (results / "evaluations").mkdir(parents=True, exist_ok=True)
    for domain, counts in (arcs or {}).items():
        path = f"evaluations/{run_id}_{domain}_arcs.json"
        (results / path).write_text(json.dumps(counts))
        test[domain]["arcs"] = path
    names = {"emb": "emb", "att": "emb+att", "ftatt": "ft:emb+att"}
    record = {
        "task": task, "dataset": dataset, "row": row, "size": size, "seed": seed, "run_id": run_id,
        "row_name": names[row], "n_train": n_train, "subset": None if size is None else {"seed": seed}, "steps": 200,
        "train_seconds": 12.0, "dev_scores": {"uas": 70.0, "las": 60.0}, "test": test, "command": "spacy train",
        "provenance": {"code": {"commit": "0123456789abcdef", "dirty": False}, "created": "2026-11-25T12:00:00+00:00"},
    }  # fmt: skip
    (results / "runs" / f"{run_id}.json").write_text(json.dumps(record))


def parser_scores(correct):
    """EWT (UAS = LAS) and PTB (UAS) test scores and arc counts of a run right on `correct` arcs."""
    counts = arc_counts(correct)
    score = 100 * sum(correct) / sum(counts["gold"])
    test = {"ewt": {"uas": score, "las": score, "trees": 100.0}, "ptb": {"uas": score, "las": None, "trees": 100.0}}
    return test, {"ewt": counts, "ptb": counts}


@pytest.fixture
def synthetic_runs(tmp_path):
    """At 100 sentences (3 seeds) att is right on one more arc than emb in 36 of 40 documents of 10
    arcs: +9.0 points under every seed. At full data (1 seed) both rows are identical. SemEval:
    emb+att - emb = +1 and -3 under two seeds."""
    results = tmp_path / "attention_curve"
    rng = np.random.default_rng(0)
    for seed in range(3):
        base = rng.integers(5, 8, size=40)
        better = base.copy()
        better[:36] += 1
        for row, correct in (("emb", base), ("att", better)):
            write_run(results, "parser", "ewt", row, 100, 100, seed, *parser_scores(correct))
    same = rng.integers(5, 10, size=40)
    for row in ("emb", "att"):
        write_run(results, "parser", "ewt", row, None, 12544, 0, *parser_scores(same))
    for seed, (emb, att) in enumerate(((80.0, 81.0), (82.0, 79.0))):
        for row, f1 in (("emb", emb), ("att", att)):
            write_run(results, "relations", "semeval", row, None, 7200, seed, {"semeval": {"macro_f1": f1}})
    return results


def test_table_recovers_a_known_difference_and_calls_identical_rows_not_shown(synthetic_runs):
    table = curve_table(synthetic_runs, n_resamples=500)
    entries = {(e["size"], e["domain"], e["metric"]): e for e in table["comparisons"]}
    assert set(entries) == {
        (size, d, m) for size in ("n100", "full") for d, m in (("ewt", "uas"), ("ewt", "las"), ("ptb", "uas"))
    }
    small = entries[("n100", "ewt", "las")]
    assert small["by_seed"] == pytest.approx([9.0, 9.0, 9.0]) and small["pooled"] == pytest.approx(9.0)
    assert 0 < small["bootstrap"]["low"] < 9.0 < small["bootstrap"]["high"]
    assert small["verdict"] == "holds" and small["at_least_one_point"] and small["ahead_in_every_seed"]
    full = entries[("full", "ptb", "uas")]
    assert full["by_seed"] == [0.0] and full["verdict"] == "not shown" and not full["at_least_one_point"]
    points = {(p["size"], p["row"], p["domain"], p["metric"]): p for p in table["curve"]}
    assert points[("n100", "att", "ewt", "las")]["seeds"] == [0, 1, 2]
    assert ("n100", "att", "ptb", "las") not in points  # the PTB sample has no labels
    relations = table["relations"][0]
    assert relations["rows"]["att"]["mean"] == pytest.approx(80.0)
    assert (
        relations["att_minus_emb"]["by_seed"] == [1.0, -3.0] and not relations["att_minus_emb"]["ahead_in_every_seed"]
    )


def test_runs_table_says_where_each_run_trained():
    def record(gpu_id, cores):
        command = f"python -m spacy train c.cfg --gpu-id {gpu_id} --paths.train t"
        return {"command": command, "provenance": {"cores": cores}}

    assert training_device(record(0, 16)) == "GPU"
    assert training_device(record(-1, 2)) == "CPU, 2 cores"
    assert training_device({"command": "spacy train c.cfg", "provenance": {}}) == "CPU"
    assert training_device({**record(0, 16), "trainings_at_once": 8}) == "GPU, 8 at once"


def test_verdict_needs_the_whole_interval_above_zero_and_names_a_single_seed():
    assert verdict({"low": 0.01, "high": 2}, 3) == "holds"
    assert verdict({"low": 0.0, "high": 2}, 3) == "not shown"
    assert verdict({"low": -2, "high": -0.1}, 3) == "reversed"
    assert verdict({"low": 0.01, "high": 2}, 1) == "holds, one seed"
    assert verdict({"low": -2, "high": -0.1}, 1) == "reversed, one seed"
    assert verdict({"low": -2, "high": 2}, 1) == "not shown"


def test_markdown_json_and_picture_from_the_run_files(synthetic_runs, tmp_path):
    pytest.importorskip("matplotlib")
    paths = {name: tmp_path / f"attention_curve.{name}" for name in ("md", "json", "png")}
    main(["curve-table", "--results-dir", str(synthetic_runs), "--output", str(paths["md"]), "--json",
          str(paths["json"]), "--png", str(paths["png"]), "--title", "# Curve", "--resamples", "300"])  # fmt: skip
    text = paths["md"].read_text()
    assert text.startswith("# Curve") and "![LAS on EWT" in text and "(attention_curve.png)" in text
    assert "| ewt | 100 | emb+att - emb | ewt | LAS | 0: +9.00, 1: +9.00, 2: +9.00 | +9.00 |" in text
    assert "| holds | yes |" in text and "| not shown | no |" in text
    assert "| semeval | 7,200 (all) | 81.0 (0: 80.0, 1: 82.0) | 80.0 (0: 81.0, 1: 79.0) | 0: +1.00, 1: -3.00 |" in text
    assert "ewt_n100_s2_att" in text and "01234567" in text and "| CPU |" in text  # runs table: commit, device
    written = json.loads(paths["json"].read_text())
    assert written["bootstrap"]["n_resamples"] == 300 and written["provenance"]["seed"] == 0
    assert len(written["runs"]) == 12 and written["budget"]["parser"]["max_steps"] == 800
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_runs_yet_says_results_are_pending(tmp_path):
    text = write_curve_table(str(tmp_path / "nothing"), str(tmp_path / "curve.md"), png=str(tmp_path / "curve.png"))
    assert "results pending" in text and not (tmp_path / "curve.png").exists()


def test_command_line_errors_are_one_line(tmp_path, capsys):
    common = ["--train", "t.spacy", "--dev", "d.spacy", "--test", "ewt=x.spacy", "--training-dir", "t"]
    common += ["--results-dir", str(tmp_path)]
    with pytest.raises(SystemExit):
        main(["curve-run", "parser", "ewt", *common, "--rows", "att", "--sizes", "0", "--seeds", "0"])
    assert "must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["curve-run", "parser", "ewt", *common[:4], "--test", "x.spacy", "--rows", "att", "--sizes", "9"])
    assert "not DOMAIN=PATH" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="does not exist"):
        main(["curve-run", "parser", "ewt", *common, "--rows", "att", "--sizes", "full", "--seeds", "0"])
    with pytest.raises(SystemExit, match="unknown parser row"):
        main(["curve-run", "parser", "ewt", *common, "--rows", "attn", "--sizes", "full", "--seeds", "0"])


def test_dry_run_prints_the_plan_and_an_estimate(tmp_path, capsys):
    args = ["curve-run", "parser", "ewt", "--train", "t.spacy", "--dev", "d.spacy", "--test", "ewt=x.spacy"]
    args += ["--subsets", "subs", "--training-dir", "t", "--results-dir", str(tmp_path), "--rows", "emb", "att"]
    main([*args, "--sizes", "100", "6400", "--seeds", "0", "1", "--dry-run"])
    out = capsys.readouterr().out
    assert "ewt_n6400_s1_att: 6400 sentences, 800 steps" in out and "--paths.train subs/n100_s0.spacy" in out
    # 8 runs of 800 steps at 1.5 s a step, 2 minutes of scoring each
    assert f"8 runs, about {8 * 800 * 1.5 / 3600 + 8 * 120 / 3600:.1f} hours" in out
    assert not (tmp_path / "runs").exists()


# -- end to end on the tiny random BERT ---------------------------------------------------------


def test_curve_end_to_end_on_a_tiny_encoder(tiny_bert_dir, ud_train_docs, tmp_path):
    """A 20-sentence subset, both rows, one step each, scored on two test sets; then the table; a
    second call reuses the results instead of training again (about 30 s on 2 idle cores: two
    `spacy train` processes)."""
    DocBin(docs=ud_train_docs).to_disk(tmp_path / "train.spacy")
    dev = read_conllu_sentences(UD_DIR / "en_ewt-ud-dev.conllu", 16)
    DocBin(docs=dev[:8]).to_disk(tmp_path / "dev.spacy")
    DocBin(docs=dev[8:]).to_disk(tmp_path / "other.spacy")
    main(["curve-subsets", str(tmp_path / "train.spacy"), str(tmp_path / "subsets"), "--sizes", "20", "full",
          "--seeds", "0", "0"])  # fmt: skip
    results = tmp_path / "results"
    args = [
        "curve-run",
        "parser",
        "ewt",
        "--train",
        str(tmp_path / "train.spacy"),
        "--dev",
        str(tmp_path / "dev.spacy"),
    ]
    args += ["--test", f"ewt={tmp_path / 'dev.spacy'}", "--test", f"ptb={tmp_path / 'other.spacy'}"]
    args += ["--subsets", str(tmp_path / "subsets"), "--training-dir", str(tmp_path / "training")]
    args += ["--results-dir", str(results), "--rows", "emb", "att", "--sizes", "20", "--seeds", "0"]
    args += ["--min-steps", "1", "--max-steps", "1", "--encoder", tiny_bert_dir]
    main([*args, "--jobs", "2"])  # both trainings at once
    for row in ("emb", "att"):
        record = json.loads((results / "runs" / f"ewt_n20_s0_{row}.json").read_text())
        assert record["trainings_at_once"] == 2 and record["n_train"] == 20 and record["steps"] == 1
        assert record["subset"]["seed"] == 0
        assert record["encoder"] == tiny_bert_dir and "--training.max_steps 1" in record["command"]
        assert set(record["test"]) == {"ewt", "ptb"} and record["test"]["ptb"]["las"] is None
        assert 0 <= record["test"]["ewt"]["las"] <= record["test"]["ewt"]["uas"] <= 100
        assert record["dev_scores"]["uas"] is not None and record["provenance"]["seed"] == 0
        arcs = json.loads((results / record["test"]["ewt"]["arcs"]).read_text())
        assert len(arcs["gold"]) == 8
    config = spacy.util.load_config(tmp_path / "training" / "ewt_n20_s0_emb" / "model-best" / "config.cfg")
    assert config["components"]["pairatt_parser"]["model"]["pair_scorer"]["use_attention"] is False
    main([*args, "--reuse", "existing"])  # nothing to train: both runs reused
    table = curve_table(results, n_resamples=200)
    assert {e["domain"] for e in table["comparisons"]} == {"ewt", "ptb"} and len(table["runs"]) == 2


def test_parallel_runs_are_scored_as_they_finish_and_returned_in_plan_order(tmp_path, monkeypatch):
    """Three trainings at once finishing in reverse order: each is scored when it ends, the records
    come back in the plan's order. With one job, training and scoring alternate; a failed training
    stops the runs behind it."""
    import threading

    from pairatt_paper import attention_curve as curve

    for name in ("train.spacy", "dev.spacy", "test.spacy"):
        (tmp_path / name).write_bytes(b"")
    runs = plan_runs(task="parser", dataset="ewt", rows=["emb"], sizes=[100, 400, 1600], seeds=[0])
    ids = [run.run_id for run in runs]
    # In parallel, every training waits until all three have started, and each ends only once the run
    # after it in the plan has been scored: the reverse order, by events, not by sleeps a loaded machine upsets.
    all_started, scored = threading.Barrier(len(ids), timeout=60), {run_id: threading.Event() for run_id in ids}
    events, running, most_at_once, failing, in_parallel = [], set(), [0], set(), [True]
    lock = threading.Lock()

    def fake_training(run, setup):
        with lock:
            events.append(("train", run.run_id))
            running.add(run.run_id)
            most_at_once[0] = max(most_at_once[0], len(running))
        if in_parallel[0]:
            all_started.wait()
            later = ids.index(run.run_id) + 1
            assert later == len(ids) or scored[ids[later]].wait(timeout=60)
        with lock:
            running.discard(run.run_id)
        if run.run_id in failing:
            raise RuntimeError(f"{run.run_id} failed")
        return {"run_id": run.run_id, "model": run.run_id, "provenance": {}}

    def fake_scoring(run, training, setup):
        events.append(("score", run.run_id))
        scored[run.run_id].set()
        return {}

    monkeypatch.setattr(curve, "train_run", fake_training)
    monkeypatch.setattr(curve, "dev_scores", lambda model, task: {"uas": 1.0})
    monkeypatch.setattr(curve, "score_run", fake_scoring)
    setup = curve.Setup(train=str(tmp_path / "train.spacy"), dev=str(tmp_path / "dev.spacy"),
                        tests={"ewt": str(tmp_path / "test.spacy")}, training_dir=str(tmp_path / "training"),
                        results_dir=str(tmp_path / "results"), subsets="unused", jobs=3)  # fmt: skip
    records = curve.run_curve(runs, setup)
    assert [r["run_id"] for r in records] == ids and most_at_once[0] == 3
    assert [run_id for event, run_id in events if event == "score"] == ids[::-1]  # the shortest first
    assert all((tmp_path / "results" / "runs" / f"{run_id}.json").exists() for run_id in ids)

    in_parallel[0] = False
    events.clear()
    curve.run_curve(runs, dataclasses.replace(setup, results_dir=str(tmp_path / "one_job"), jobs=1))
    assert events == [(event, run_id) for run_id in ids for event in ("train", "score")]

    events.clear()
    failing.add(ids[0])
    with pytest.raises(RuntimeError, match="failed"):
        curve.run_curve(runs, dataclasses.replace(setup, results_dir=str(tmp_path / "again"), jobs=1))
    assert events == [("train", ids[0])] and not (tmp_path / "again" / "runs").exists()
    with pytest.raises(ValueError, match="jobs"):
        curve.run_curve(runs, dataclasses.replace(setup, jobs=0))


def test_relation_rows_get_a_paired_interval_from_the_kept_labels(tmp_path):
    """att right on 300 more of 1,000 test sentences under both seeds: the interval lies above 0; a
    size whose runs kept no per-sentence labels gets no interval."""
    from spacy_pairatt.corpora.relation_metrics import SEMEVAL_LABELS, semeval_official_scores

    results = tmp_path / "attention_curve"
    rng = np.random.default_rng(0)
    gold = [SEMEVAL_LABELS[i] for i in rng.integers(0, 18, size=1000)]
    for seed in range(2):
        wrong = [SEMEVAL_LABELS[(SEMEVAL_LABELS.index(g) + 1) % 18] for g in gold]
        right = rng.random(1000) < 0.5
        for row, extra in (("emb", 0), ("att", 300)):
            predicted = [g if r or i < extra else w for i, (g, w, r) in enumerate(zip(gold, wrong, right))]
            path = f"evaluations/semeval_full_s{seed}_{row}_semeval_labels.json"
            (results / "evaluations").mkdir(parents=True, exist_ok=True)
            (results / path).write_text(json.dumps({"gold": gold, "predicted": predicted}))
            f1 = 100 * semeval_official_scores(gold, predicted)["macro_f1"]
            write_run(
                results, "relations", "semeval", row, None, 7200, seed, {"semeval": {"macro_f1": f1, "labels": path}}
            )
            write_run(results, "relations", "semeval", row, 1000, 1000, seed, {"semeval": {"macro_f1": f1}})
    rows = {row["size"]: row for row in curve_table(results, n_resamples=300)["relations"]}
    full = rows["full"]["att_minus_emb"]
    assert full["verdict"] == "holds" and 0 < full["bootstrap"]["low"] < full["mean"] < full["bootstrap"]["high"]
    assert full["bootstrap"]["n_docs"] == 1000
    assert "verdict" not in rows["n1000"]["att_minus_emb"] and "bootstrap" not in rows["n1000"]["att_minus_emb"]


def test_labels_of_an_earlier_relation_run_are_added_only_when_they_give_its_recorded_score(tmp_path, monkeypatch):
    from pairatt_paper.attention_curve import add_relation_labels
    from spacy_pairatt.evaluation import relation_eval

    gold = ["Cause-Effect(e1,e2)", "Other", "Member-Collection(e2,e1)", "Cause-Effect(e2,e1)"]
    predicted = ["Cause-Effect(e1,e2)", "Other", "Member-Collection(e1,e2)", "Cause-Effect(e2,e1)"]
    monkeypatch.setattr(
        relation_eval,
        "evaluate_semeval",
        lambda model, data, labels: {"labels": {"gold": gold, "predicted": predicted}},
    )
    setup = Setup("train.spacy", "dev.spacy", {"semeval": "test.spacy"}, str(tmp_path), str(tmp_path))
    # Official macro-F1 over Cause-Effect (P 1, R 1) and Member-Collection (P 0, R 0): 50.
    record = {"run_id": "semeval_full_s0_att", "model": "model-best", "test": {"semeval": {"macro_f1": 50.0}}}
    assert add_relation_labels(record, setup)
    labels = json.loads((tmp_path / record["test"]["semeval"]["labels"]).read_text())
    assert labels == {"gold": gold, "predicted": predicted}
    assert not add_relation_labels(record, setup)  # kept: nothing to add
    changed = {"run_id": "semeval_full_s1_att", "model": "model-best", "test": {"semeval": {"macro_f1": 75.0}}}
    with pytest.raises(ValueError, match="model changed since it was scored"):
        add_relation_labels(changed, setup)
