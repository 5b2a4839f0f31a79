"""The attention curve's blocks (docs/attention_curve.md, docs/ablation.md: a part of results/attention_curve.md;
README.md: a summary): their figures are those of results/attention_curve.json and its run records, and the table
holds every run of the workflow's plan in project.yml, as the summary says."""

import json
import shlex

import pytest
from weasel.util import load_project_config

from docs_build.blocks import CURVE_JSON, RUNS_DIR, curve_sources, goal_text
from docs_build.plan import BLOCKS
from docs_build.results import Results, source_note
from pairatt_paper.attention_curve import Run
from pairatt_paper.attention_curve_table import sentences
from tests.conftest import PAPER, REPO

COMMAND = "python -m spacy project run attention-curve projects/paper"
COMPLETE = "Every run of the `attention-curve` workflow's plan is in the table."
# The blocks as the docs show them: the figures, then their source note.
attention_curve_block, attention_curve_summary_block = BLOCKS["attention-curve"], BLOCKS["attention-curve-summary"]


def workflow_runs():
    """(Run, its Budget) of every run of the workflow's `curve-run` commands in project.yml, parsed with the
    command's own arguments."""
    from pairatt_paper.attention_curve import plan_runs
    from pairatt_paper.cli import COMMAND_GROUPS
    from pairatt_paper.cli.attention_curve import curve_budget
    from spacy_pairatt.cli import build_parser

    project = load_project_config(PAPER)
    commands = {command["name"]: command for command in project["commands"]}
    runs = []
    for name in project["workflows"]["attention-curve"]:
        for words in map(shlex.split, commands[name].get("script", [])):
            if words[:4] == ["python", "-m", "pairatt_paper", "curve-run"]:
                args = build_parser(COMMAND_GROUPS).parse_args(words[3:])
                runs += [
                    (run, curve_budget(args))
                    for run in plan_runs(args.task, args.dataset, args.rows, args.sizes, args.seeds)
                ]
    return runs


def committed_table():
    path = REPO / CURVE_JSON
    if not path.exists():
        pytest.skip(f"{CURVE_JSON} is not in this checkout")
    return json.loads(path.read_text(encoding="utf8"))


def issue_plan():
    """The study's plan, restated from the project vars: the runs the workflow must make."""
    v = load_project_config(PAPER)["vars"]

    def sizes(text):
        return [None if s == "full" else int(s) for s in str(text).split()]

    def seeds(text):
        return [int(s) for s in str(text).split()]

    parts = [
        ("parser", "ewt", ("emb", "att"), sizes(v["curve_sizes"]), seeds(v["curve_seeds"])),
        ("parser", "ewt", ("ftatt",), sizes(v["curve_ftatt_sizes"]), seeds(v["curve_seeds"])),
        ("parser", "ewt", ("emb", "att"), sizes(v["curve_large_sizes"]), seeds(v["curve_large_seeds"])),
        ("relations", "semeval", ("emb", "att"), [None], seeds(v["curve_rel_seeds"])),
        ("relations", "semeval", ("emb", "att"), sizes(v["curve_rel_size"]), seeds(v["curve_rel_small_seeds"])),
        ("relations", "semeval_markers", ("emb", "att"), sizes(v["curve_rel_size"]), seeds(v["curve_rel_small_seeds"])),
    ]  # fmt: skip
    return {
        Run(task, data, row, size, seed).run_id
        for task, data, rows, size_list, seed_list in parts
        for size in size_list for seed in seed_list for row in rows
    }  # fmt: skip


def test_the_workflow_plans_the_runs_the_issue_asks_for():
    planned = [run.run_id for run, _ in workflow_runs()]
    assert len(planned) == len(set(planned)) and set(planned) == issue_plan()
    assert {"ewt_n6400_s0_att", "ewt_full_s0_emb", "semeval_full_s2_att", "semeval_markers_n1000_s0_emb"} <= set(
        planned
    )


def test_the_committed_table_holds_every_planned_run_at_its_budget_as_the_blocks_say():
    """The summary states that the table is complete: a run of the plan missing from it, or trained to other steps
    than the plan's budget gives its size (an earlier rule), fails here."""
    present = {run["run_id"]: run for run in committed_table()["runs"]}
    missing = [run.run_id for run, _ in workflow_runs() if run.run_id not in present]
    assert missing == []
    for run, budget in workflow_runs():
        assert present[run.run_id]["steps"] == budget.steps(present[run.run_id]["n_train"]), run.run_id
    results = Results(REPO)
    assert COMPLETE in attention_curve_summary_block(results)


def test_the_block_figures_are_those_of_the_committed_table():
    table, results = committed_table(), Results(REPO)
    block, summary = attention_curve_block(results), attention_curve_summary_block(results)
    shown = [
        e for e in table["comparisons"]
        if (e["domain"], e["metric"], e["worse"]) == ("ewt", "las", "emb") and e["better"] in ("att", "ftatt")
    ]  # fmt: skip
    assert shown
    for e in shown:
        by_seed = ", ".join(f"{s}: {d:+.2f}" for s, d in zip(e["seeds"], e["by_seed"]))
        interval = f"{e['bootstrap']['low']:+.2f} to {e['bootstrap']['high']:+.2f}"
        size = sentences(e["n_train"], e["size"])
        row = f"| {size} | {e['comparison']} | ewt | LAS | {by_seed} | {e['pooled']:+.2f} | {interval} |"
        assert row in block, row
        assert f"{e['n_train']:,} sentences {e['pooled']:+.2f} ({e['verdict']})" in summary
    reached = [e for e in shown if e.get("at_least_one_point")]
    assert ("not reached at any size run so far" in summary) == (not reached)
    assert "## Runs" not in block and "#### Relations" not in block and "### Relations: SemEval" in block
    note = source_note(results, curve_sources(results), COMMAND)
    assert block.endswith(note) and summary.endswith(note)


def write(root, path, data):
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(json.dumps(data), encoding="utf8")


def test_a_gain_of_a_point_reaches_the_goal_and_the_note_names_missing_run_records(tmp_path):
    assert f"not measured yet: `{CURVE_JSON}`" in attention_curve_block(Results(tmp_path))
    assert f"not measured yet: `{CURVE_JSON}`" in attention_curve_summary_block(Results(tmp_path))
    comparison = {
        "dataset": "ewt", "n_train": 100, "size": "n100", "better": "att", "worse": "emb",
        "comparison": "emb+att - emb", "domain": "ewt", "metric": "las", "seeds": [0], "by_seed": [1.25],
        "pooled": 1.25, "bootstrap": {"low": 0.5, "high": 2.0}, "verdict": "holds", "at_least_one_point": True,
    }  # fmt: skip
    runs = [
        {"run_id": f"ewt_n100_s0_{row}", "task": "parser", "n_train": 100, "steps": 800, "dev": {"las": las}}
        for row, las in (("att", 61.5), ("emb", 61.0))
    ]
    budget = {"parser": {"rule": "800 steps at every size"}}
    write(
        tmp_path,
        CURVE_JSON,
        {"runs": runs, "comparisons": [comparison], "curve": [], "relations": [], "budget": budget},
    )
    summary = attention_curve_summary_block(Results(tmp_path))
    assert "emb+att - emb: 100 sentences +1.25 (holds)" in summary
    assert "reached by emb+att - emb at 100 sentences (+1.25)" in summary
    assert f"not measured yet: `{RUNS_DIR}/ewt_n100_s0_att.json`" in summary  # the table, without its run records


def test_only_a_gain_over_the_row_without_attention_reaches_the_goal():
    """ft:emb+att - emb+att compares two ways of using attention: shown, but not what attention adds."""
    over_att = {
        "dataset": "ewt", "n_train": 100, "better": "ftatt", "worse": "att", "comparison": "ft:emb+att - emb+att",
        "domain": "ewt", "metric": "las", "pooled": 1.17, "verdict": "holds", "at_least_one_point": True,
    }  # fmt: skip
    over_emb = {
        **over_att,
        "worse": "emb",
        "comparison": "ft:emb+att - emb",
        "pooled": 0.4,
        "at_least_one_point": False,
    }
    assert "not reached at any size run so far" in goal_text([over_att, over_emb])
    assert "ft:emb+att - emb+att" not in goal_text([over_att, over_emb])
    reached = {**over_emb, "pooled": 1.25, "at_least_one_point": True}
    assert goal_text([over_att, reached]).endswith("reached by ft:emb+att - emb at 100 sentences (+1.25).")
