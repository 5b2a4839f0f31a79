"""Every `spacy project run` command the docs, project.yml and the package print names a command or workflow
of project.yml and passes `--vars.*` overrides the way spaCy's CLI reads them: after the project directory.
`spacy project run NAME --vars.x 1` fails (`--vars.x` is taken for the directory), so a user copying it
gets an error instead of the run."""

import re

import srsly

from tests.conftest import REPO

RUN_COMMAND = re.compile(r"spacy project run ([a-z][a-z0-9_-]*)((?: +(?:\\\n *)?[^\s`\"']+)*)")


def documented_commands():
    paths = [REPO / "README.md", REPO / "project.yml", *sorted((REPO / "docs").glob("*.md"))]
    paths += sorted((REPO / "spacy_pairatt").rglob("*.py")) + sorted((REPO / "projects" / "paper").rglob("*.py"))
    for path in paths:
        for match in RUN_COMMAND.finditer(path.read_text(encoding="utf8")):
            yield path.relative_to(REPO), match.group(1), match.group(2).replace("\\\n", " ").split()


def project_folder(arguments) -> str:
    """The project a documented command runs in: its directory argument, if any (else the checkout's)."""
    folder = arguments[0].rstrip("/).,;") if arguments and not arguments[0].startswith("--") else "."
    return "projects/paper" if folder.endswith("projects/paper") or folder in ("..", "../..") else "."


def overrides_misplaced(arguments):
    """True where a `--vars.*` override comes before any project directory."""
    return any(arg.startswith("--vars.") for arg in arguments) and (not arguments or arguments[0].startswith("--"))


def test_each_documented_run_command_exists_and_places_its_overrides_after_the_directory():
    names = {}
    for folder in (".", "projects/paper"):  # the user workflow and the paper's project
        project = srsly.read_yaml(REPO / folder / "project.yml")
        names[folder] = {command["name"] for command in project["commands"]} | set(project["workflows"])
    commands = list(documented_commands())
    assert len(commands) > 10
    unknown = [(str(path), name) for path, name, args in commands if name not in names[project_folder(args)]]
    misplaced = [(str(path), name, args) for path, name, args in commands if overrides_misplaced(args)]
    assert unknown == [] and misplaced == []


def test_the_check_catches_an_override_before_the_directory():
    assert overrides_misplaced(["--vars.gpu_id", "0"])
    assert not overrides_misplaced([".", "--vars.gpu_id", "0"])
    assert not overrides_misplaced(["--force"])
