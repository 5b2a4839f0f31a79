"""The docs' plan, plan.json: every generated block of README.md and docs/*.md (the text between
`<!-- NAME:start -->` and `<!-- NAME:end -->`) with the renderer of its figures, the results files behind them
and the command that makes them again; the model card's files; the attention curve's planned runs."""

import json
from importlib import import_module
from pathlib import Path
from typing import Callable, Dict, List, Optional

from .results import Results, Sources, source_note

PLAN = json.loads((Path(__file__).parent / "plan.json").read_text(encoding="utf8"))
PROJECT = "python -m spacy project run "


def planned_function(name: str) -> Callable:
    """The function that plan.json names "module.function" (a module of docs_build)."""
    module, _, function = name.rpartition(".")
    return getattr(import_module(f"{__package__}.{module}"), function)


class Block:
    """A block of the plan: its figures (the renderer's markdown, ending in a blank line, "" where its files are
    missing), then, where it names a command, where they come from (`source_note`)."""

    def __init__(self, name: str, entry: Dict):
        self.name, self.entry = name, entry
        self.files: Dict[str, List[list]] = entry.get("files", {})  # role -> rows, each ending in (path, kind)

    def __getitem__(self, setting: str):
        return self.entry[setting]

    def path(self, role: str) -> str:
        return self.files[role][0][-2]

    def json(self, results: Results, role: str) -> Optional[Dict]:
        """The results file of `role` (its first row's), or None where it is not there."""
        return results.json(self.path(role))

    def sources(self, results: Results) -> Sources:
        """Every row of its files, or what its "sources" function finds where the results decide them."""
        if "sources" in self.entry:
            return planned_function(self.entry["sources"])(results, self)
        return [tuple(row[-2:]) for rows in self.files.values() for row in rows]

    def __call__(self, results: Results) -> str:
        text, command = planned_function(self.entry["render"])(results, self), self.entry.get("command")
        if command is None:
            return text
        return text + source_note(results, self.sources(results), command if command[:7] == "python " else PROJECT + command)


BLOCKS = {name: Block(name, entry) for name, entry in PLAN["blocks"].items()}
