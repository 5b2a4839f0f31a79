"""Two homes: spacy_pairatt/ holds what `spacy.load` and a user's commands need; the paper's study, benches and
docs tool are a project beside it (projects/paper) that uses the library and is never used by it. Every command
of both project.yml files calls something that exists."""

import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from weasel.util import load_project_config

from tests.conftest import PAPER, REPO

PACKAGE = REPO / "spacy_pairatt"
# what lives in projects/paper: the study package, the docs tool and the bench scripts (imported by name there)
PAPER_MODULES = ("pairatt_paper", "docs_build", "bench")
USER_COMMANDS = {
    "fetch-ud", "ud-docs", "fetch-ptb", "ptb-convert", "fetch-semeval", "semeval-convert", "fetch-docred",
    "docred-convert", "fetch-mpnet", "train-resumable", "ud-tokenize", "tokenizer-eval", "parse", "calibrate", "review",
    "semeval-evaluate", "docred-evaluate", "relations-table", "evaluate", "table", "ud-eval", "ud-table",
    "segmenter-sweep", "ud-text", "source-stamp", "assemble", "demo",
}  # fmt: skip
STUDY_COMMANDS = {"probe", "visualize", "mlm-adapt", "ablation-run", "ablation-table", "curve-subsets", "curve-run",
                  "curve-table", "encoders-table"}  # fmt: skip


def imported_names(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def test_nothing_in_the_package_imports_the_paper_project():
    found = [
        (str(path.relative_to(REPO)), name)
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in imported_names(path)
        if name.split(".")[0] in PAPER_MODULES
    ]
    assert found == []


def wheel_packages():
    """setup.py's packages, listed by setuptools in a child (imported here, it changes this process's path)."""
    setup = (REPO / "setup.py").read_text(encoding="utf8")
    include = ast.literal_eval(setup.split("find_packages(include=", 1)[1].split(")", 1)[0])
    listing = f"import json, setuptools; print(json.dumps(setuptools.find_packages({str(REPO)!r}, include={include})))"
    done = subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_the_wheel_holds_no_study_code():
    packages = wheel_packages()
    assert "spacy_pairatt.components" in packages and all(name.split(".")[0] == "spacy_pairatt" for name in packages)
    assert not [name for name in packages if name.split(".")[-1] in ("study", *PAPER_MODULES)]
    study_files = {path.name for path in (PAPER / "pairatt_paper").glob("*.py")} - {"__init__.py", "__main__.py"}
    assert study_files and not [path for path in PACKAGE.rglob("*.py") if path.name in study_files]


def subcommands(parser):
    return set(parser._subparsers._group_actions[0].choices)


def test_the_command_line_lists_only_user_commands():
    from pairatt_paper.cli import COMMAND_GROUPS
    from spacy_pairatt.cli import build_parser

    assert subcommands(build_parser()) == USER_COMMANDS
    assert subcommands(build_parser(COMMAND_GROUPS)) == STUDY_COMMANDS


def projects():
    return {".": load_project_config(REPO), "projects/paper": load_project_config(PAPER)}


def test_the_user_workflow_stays_short_and_keeps_both_tiers():
    names = [command["name"] for command in projects()["."]["commands"]]
    assert len(names) <= 30
    tiers = {"train", "train-pipeline", "package", "package-parser", "calibrate", "demo-train",
             "train-segmenter-standalone", "fetch-mpnet", "train-mpnet", "evaluate-mpnet",
             "train-pipeline-trf", "evaluate-pipeline-trf", "package-trf"}  # fmt: skip
    assert tiers <= set(names)


def ignored_by_git(paths):
    """The paths git would not track (outputs: corpus/, training/, assets/ ...)."""
    done = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--stdin"], input="\n".join(paths),
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode not in (0, 1):
        pytest.skip("not a git checkout")
    return set(done.stdout.splitlines())


def script_problems(folder: str, words, parsers, configs):
    """What in one script line does not resolve: the file, the module or the subcommand it calls."""
    root = REPO / folder
    if words[:2] == ["python", "-m"]:
        module, rest = words[2], words[3:]
        if module in parsers:
            return [] if rest[0] in parsers[module] else [f"{module} has no command {rest[0]}"]
        if module == "docs_build":
            return [] if (root / "docs_build" / "__main__.py").exists() else ["no docs_build here"]
        if module == "spacy" and rest[:2] == ["project", "run"]:
            target = rest[3] if len(rest) > 3 and not rest[3].startswith("-") else "."
            where = os.path.relpath((root / target).resolve(), REPO.resolve())
            known = {command["name"] for command in configs[where]["commands"]} | set(configs[where]["workflows"])
            return [] if rest[2] in known else [f"{where}/project.yml has no command {rest[2]}"]
        if module == "spacy":
            return [] if rest[0] in ("train", "convert", "package", "evaluate") else [f"spacy {rest[0]}?"]
        return [f"unknown module {module}"]
    if words[0] == "python":
        return [] if (root / words[1]).is_file() else [f"no script {folder}/{words[1]}"]
    return [f"not a python command: {words[0]}"]


def path_in_checkout(folder: str, dep: str) -> str:
    """`dep` of the project in `folder` as a path of the checkout for git to judge: through the project's own
    links (projects/paper's assets/, training/ ... name the checkout's), and up to a link inside those (assets/ud_ewt
    links to ../shared/data, outside the checkout; git judges the link and refuses what lies beyond it)."""
    first, *rest = Path(dep).parts
    path = (REPO / folder / first).resolve()
    for part in rest:
        if path.is_symlink():
            break
        path = path / part
    return os.path.relpath(path, REPO.resolve())


def test_every_command_of_both_projects_resolves():
    """Each script line calls a script, module or subcommand that exists (a run_cost wrapper's inner command too),
    each dependency and output is one path, and each dependency that git would track (configs, code, results)
    is there."""
    from pairatt_paper.cli import COMMAND_GROUPS
    from spacy_pairatt.cli import build_parser

    parsers = {"spacy_pairatt": subcommands(build_parser()), "pairatt_paper": subcommands(build_parser(COMMAND_GROUPS))}
    configs = projects()
    problems, deps = [], []
    for folder, project in configs.items():
        for command in project["commands"]:
            for line in command.get("script", []):
                words = shlex.split(line)
                parts = [words] if "--" not in words else [words[: words.index("--")], words[words.index("--") + 1 :]]
                found = [problem for part in parts for problem in script_problems(folder, part, parsers, configs)]
                problems += [f"{command['name']}: {problem}" for problem in found]
            deps += [(folder, command["name"], dep) for dep in command.get("deps", [])]
            # two bare variables in a row of a list come out of confection as one string, "a, b"
            problems += [f"{command['name']}: {path!r} is two paths read as one" for key in ("deps", "outputs")
                         for path in command.get(key, []) if ", " in path]  # fmt: skip
    paths = [path_in_checkout(folder, dep) for folder, _, dep in deps]
    ignored = ignored_by_git(paths)
    problems += [f"{name}: dependency {dep} missing" for (_, name, dep), path in zip(deps, paths)
                 if path not in ignored and not (REPO / path).exists()]  # fmt: skip
    assert problems == []
