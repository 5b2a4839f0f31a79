"""Provenance of results files: commit and dirtiness, library versions, command, seed, wall time, cores."""

import json
import platform
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from spacy_pairatt.cli import main as cli_main
from spacy_pairatt.reporting import provenance as provenance_module
from spacy_pairatt.reporting.provenance import (
    LIBRARIES,
    SOURCE_STAMP_ENV,
    code_version,
    command_as_typed,
    process_start,
    provenance,
    source_stamp,
)
from tests.conftest import PAPER, REPO


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path):
    """A git checkout shaped like this project's: setup.py, the package, a results folder; one commit."""
    root = tmp_path / "checkout"
    (root / "spacy_pairatt").mkdir(parents=True)
    (root / "results").mkdir()
    (root / "setup.py").write_text("# setup\n")
    (root / "spacy_pairatt" / "code.py").write_text("X = 1\n")
    (root / "results" / "scores.json").write_text("{}\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    return root


def test_records_versions_command_seed_time_and_cores():
    started = time.time() - 5
    record = provenance(seed=7, started=started, command="python -m spacy_pairatt evaluate M D")
    assert record["versions"]["python"] == platform.python_version()
    for name in ("spacy", "spacy-transformers", "thinc", "torch", "transformers"):
        assert name in LIBRARIES and record["versions"][name] == version(name)
    assert record["command"] == "python -m spacy_pairatt evaluate M D"
    assert record["seed"] == 7
    assert 5 <= record["wall_seconds"] < 60
    assert record["cores"] >= 1 and record["cpu_count"] >= record["cores"]
    assert record["allocator"] in ("glibc", "system") or record["allocator"].startswith("jemalloc 5.")
    assert record["created"].endswith("+00:00")
    assert set(record["code"]) == {"commit", "dirty", "dirty_paths"}


def test_this_checkout_is_recorded_by_its_commit():
    if not (REPO / ".git").exists():
        pytest.skip("not run from a git checkout")
    assert provenance()["code"]["commit"] == git(REPO, "rev-parse", "HEAD")


def test_dirty_means_changed_code_not_changed_results(checkout):
    assert code_version(checkout) == {"commit": git(checkout, "rev-parse", "HEAD"), "dirty": False, "dirty_paths": []}
    (checkout / "results" / "scores.json").write_text('{"uas": 1}\n')
    (checkout / "results" / "new.json").write_text("{}\n")
    assert code_version(checkout)["dirty"] is False
    (checkout / "spacy_pairatt" / "code.py").write_text("X = 2\n")
    (checkout / "spacy_pairatt" / "new.py").write_text("Y = 1\n")
    assert code_version(checkout)["dirty"] is True
    assert code_version(checkout)["dirty_paths"] == ["spacy_pairatt/code.py", "spacy_pairatt/new.py"]


def test_results_name_the_code_the_process_started_with_not_the_checkout_at_the_end(checkout):
    """A long run writes its results after the checkout may have moved on: they name the code it started with."""
    (checkout / "spacy_pairatt" / "reporting").mkdir(parents=True)
    shutil.copy(Path(provenance_module.__file__), checkout / "spacy_pairatt" / "reporting" / "provenance.py")
    (checkout / "spacy_pairatt" / "__init__.py").write_text("")
    (checkout / "spacy_pairatt" / "reporting" / "__init__.py").write_text("")
    git(checkout, "add", ".")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "provenance")
    script = (
        "import json, pathlib, sys; sys.path.insert(0, sys.argv[1]);"
        "from spacy_pairatt.reporting.provenance import code_at_start, code_version, provenance;"
        "code_at_start();"
        "pathlib.Path(sys.argv[1], 'spacy_pairatt', 'code.py').write_text('X = 2');"
        "print(json.dumps([provenance()['code'], code_version()]))"
    )
    run = subprocess.run([sys.executable, "-c", script, str(checkout)], check=True, capture_output=True, text=True)
    recorded, at_the_end = json.loads(run.stdout)
    assert recorded == {"commit": git(checkout, "rev-parse", "HEAD"), "dirty": False, "dirty_paths": []}
    assert at_the_end["dirty"] is True and at_the_end["dirty_paths"] == ["spacy_pairatt/code.py"]


def test_no_checkout_no_commit(tmp_path):
    assert code_version(tmp_path) == {"commit": None, "dirty": None, "dirty_paths": []}


def test_a_copy_of_the_tree_names_its_commit_through_a_source_stamp(checkout, tmp_path, monkeypatch):
    """A GPU machine gets the working tree without .git (or with a stale one): the stamp written from
    the clean checkout names the commit there, and a changed or missing stamped file makes the copy dirty."""
    stamp = tmp_path / "stamp.json"
    cli_main(["source-stamp", str(stamp), "--root", str(checkout)])
    assert json.loads(stamp.read_text())["files"] == source_stamp(checkout)["files"]
    assert set(source_stamp(checkout)["files"]) == {"setup.py", "spacy_pairatt/code.py"}
    copy = tmp_path / "copy"
    shutil.copytree(checkout, copy, ignore=shutil.ignore_patterns(".git"))
    assert code_version(copy)["commit"] is None
    monkeypatch.setenv(SOURCE_STAMP_ENV, str(stamp))
    head = git(checkout, "rev-parse", "HEAD")
    assert code_version(copy) == {"commit": head, "dirty": False, "dirty_paths": [], "checked": "source stamp"}
    (copy / "results" / "scores.json").write_text('{"uas": 1}\n')
    assert code_version(copy)["dirty"] is False
    (copy / "spacy_pairatt" / "code.py").write_text("X = 2\n")
    (copy / "setup.py").unlink()
    assert code_version(copy)["commit"] is None  # no setup.py: not a copy of the project
    (copy / "setup.py").write_text("# changed\n")
    assert code_version(copy) == {
        "commit": head,
        "dirty": True,
        "dirty_paths": ["setup.py", "spacy_pairatt/code.py"],
        "checked": "source stamp",
    }
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "later")
    shutil.copytree(checkout / ".git", copy / ".git")  # a stale .git in the copy: the stamp still decides
    assert code_version(copy)["commit"] == head != git(checkout, "rev-parse", "HEAD")
    assert source_stamp(checkout)["commit"] == git(checkout, "rev-parse", "HEAD")  # git, not the named stamp
    monkeypatch.delenv(SOURCE_STAMP_ENV)
    assert code_version(checkout)["commit"] == git(checkout, "rev-parse", "HEAD")


def test_a_source_stamp_needs_a_clean_checkout(checkout, tmp_path, monkeypatch):
    (checkout / "spacy_pairatt" / "code.py").write_text("X = 2\n")
    with pytest.raises(SystemExit, match="clean git checkout"):
        cli_main(["source-stamp", str(tmp_path / "stamp.json"), "--root", str(checkout)])
    with pytest.raises(ValueError, match="clean git checkout"):
        source_stamp(tmp_path)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "setup.py").write_text("# setup\n")
    (tmp_path / "bad.json").write_text("[]")
    monkeypatch.setenv(SOURCE_STAMP_ENV, str(tmp_path / "bad.json"))
    with pytest.raises(ValueError, match="not a source stamp"):
        code_version(copy)
    (tmp_path / "bad.json").write_text('{"commit": "abc", "files": ["setup.py"]}')
    with pytest.raises(ValueError, match="not a source stamp.*'files' an object"):
        code_version(copy)
    monkeypatch.setenv(SOURCE_STAMP_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="missing.json: not a source stamp"):
        code_version(copy)


def test_command_line_as_typed():
    main = str(Path(provenance_module.__file__).parents[1] / "__main__.py")
    assert command_as_typed([main, "evaluate", "a b", "--output", "x.json"]) == (
        "python -m spacy_pairatt evaluate 'a b' --output x.json"
    )
    assert command_as_typed(["bench/speed.py", "--limit", "5"]) == "python bench/speed.py --limit 5"
    assert command_as_typed(["-c"]) == "python -c"


def test_wall_seconds_default_to_the_process_start():
    start = process_start()
    assert start <= provenance_module._IMPORTED <= time.time()
    assert provenance()["wall_seconds"] >= round(time.time() - provenance_module._IMPORTED, 1) - 0.1


def test_a_command_asks_git_as_it_starts_and_its_results_name_that_code(monkeypatch, capsys):
    """`python -m spacy_pairatt` takes `code_at_start()` before the command runs: what it writes at the
    end names the code the command started with."""
    from spacy_pairatt.cli import shipping

    def at(moment):
        return lambda: {"commit": moment, "dirty": False, "dirty_paths": []}

    def command_while_the_checkout_moves(args):
        monkeypatch.setattr(provenance_module, "code_version", at("at end"))
        print(provenance()["code"]["commit"])

    monkeypatch.setattr(provenance_module, "code_version", at("at start"))
    monkeypatch.setattr(shipping, "write_source_stamp", command_while_the_checkout_moves)
    provenance_module.code_at_start.cache_clear()
    try:
        cli_main(["source-stamp", "unused.json"])
    finally:
        provenance_module.code_at_start.cache_clear()
    assert capsys.readouterr().out == "at start\n"


def test_every_bench_that_records_provenance_takes_the_code_version_as_it_starts():
    """provenance() asks git once, at its first call: a bench writes its results at the end, after a
    long run in which the checkout may move on, so it takes the version first (code_at_start)."""
    import ast

    for script in sorted([*(REPO / "scripts").glob("*.py"), *(PAPER / "bench").glob("*.py")]):
        tree = ast.parse(script.read_text(encoding="utf8"))
        if "provenance(" not in ast.unparse(tree):
            continue
        guard = next(node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test))
        first_calls = [ast.unparse(node) for node in guard.body if isinstance(node, ast.Expr)]
        assert first_calls and first_calls[0] == "code_at_start()", script.name
