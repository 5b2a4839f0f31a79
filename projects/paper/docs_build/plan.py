"""The docs' plan, plan.json: every generated block of README.md, docs/*.md and projects/paper/README.md (the
text between `<!-- NAME:start -->` and `<!-- NAME:end -->`) with the renderer of its figures, the results files
behind them and the command that makes them again; the model card's files.
`regenerate` writes the blocks (tests/docs_tool/test_docs_tables.py checks that they are up to date)."""

import json
import re
from importlib import import_module
from pathlib import Path
from typing import Callable, Dict, List, Optional

from spacy_pairatt.reporting.tables import replace_marked_block

from .results import Results, Sources, source_note

PLAN = json.loads((Path(__file__).parent / "plan.json").read_text(encoding="utf8"))


def planned_function(name: str) -> Callable:
    """The function that plan.json names "module.function" (a module of docs_build)."""
    module, _, function = name.rpartition(".")
    return getattr(import_module(f"{__package__}.{module}"), function)


class Block:
    """A block of the plan: its figures (its renderer's markdown, ending in a blank line; "" where a file of the
    roles it `requires` is missing), then, where it names a command, where they come from (`source_note`)."""

    def __init__(self, name: str, entry: Dict):
        self.name, self.entry = name, entry
        self.files: Dict[str, List[list]] = entry.get("files", {})  # role -> rows, each ending in (path, kind)

    def __getitem__(self, setting: str):
        return self.entry[setting]

    def path(self, role: str) -> str:
        return self.files[role][0][-2]

    def json(self, results: Results, role: str) -> Optional[Dict]:
        return results.json(self.path(role))

    def sources(self, results: Results) -> Sources:
        """Every row of its files, or what its "sources" function finds where the results decide them."""
        if "sources" in self.entry:
            return planned_function(self.entry["sources"])(results, self)
        return [tuple(row[-2:]) for rows in self.files.values() for row in rows]

    def __call__(self, results: Results) -> str:
        required = [row[-2] for role in self.entry.get("requires", ()) for row in self.files[role]]
        missing = any(results.json(path) is None for path in required)  # no figures, and the note says so
        text = "" if missing else planned_function(self.entry["render"])(results, self)
        command = self.entry.get("command")
        if command is None:
            return text
        command = command if command.startswith("python ") else f"python -m spacy project run {command}"
        return text + source_note(results, self.sources(results), command)


BLOCKS = {name: Block(name, entry) for name, entry in PLAN["blocks"].items()}


# The pages a user reads; the paper's README (also in "doc_files") may hold a block whose files the code has
# changed under until it is made again.
USER_DOCS = ("README.md", "docs/*.md")


def doc_files(root: Path, patterns=None) -> List[Path]:
    return sorted({path for pattern in patterns or PLAN["doc_files"] for path in Path(root).glob(pattern)})


def relative_links(text: str, page: Path) -> str:
    """A block's links to docs/X.md (as README.md and the model card have them), relative to `page`."""
    return text.replace("](docs/", "](") if page.parent.name == "docs" else text


def regenerate(root: Path = Path("."), check: bool = False) -> List[str]:
    """Rewrite every generated block of README.md, docs/*.md and projects/paper/README.md from `root`/results
    (check: write nothing); a stale block in README.md or docs/*.md is an error.

    Returns "FILE: NAME" for each block whose text changed (or would change)."""
    results, changed, texts, user_docs = Results(root), [], {}, doc_files(root, USER_DOCS)
    for path in doc_files(root):
        text = original = path.read_text(encoding="utf8")
        names = re.findall(r"<!-- ([\w-]+):start -->", text)
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"{path}: the block <!-- {name}:start --> is there {names.count(name)} times")
            if name not in BLOCKS:
                raise ValueError(f"{path}: no block <!-- {name}:start --> in docs_build/plan.json")
            texts[name] = texts[name] if name in texts else BLOCKS[name](results)
            if "**Stale**" in texts[name] and path in user_docs:
                raise ValueError(
                    f"{path.relative_to(root)}: the block {name} is stale: re-run its command, or move it to "
                    "projects/paper/README.md (no stale figure in the user docs)"
                )
            new = replace_marked_block(text, name, relative_links(texts[name], path.relative_to(root)))
            changed += [f"{path.relative_to(root)}: {name}"] if new != text else []
            text = new
        if text != original and not check:
            path.write_text(text, encoding="utf8")
    return changed
