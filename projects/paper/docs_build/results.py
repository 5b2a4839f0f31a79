"""Where a generated block's figures come from: the results files behind it, when each was made (its
provenance's date, else the date git committed it, with "no provenance recorded"), and **stale** when a
change of the code listed in code_changes.json (kept by hand) came after."""

import json
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Dict, FrozenSet, Optional, Sequence, Tuple

Sources = Sequence[Tuple[str, str]]  # (path relative to the checkout, result kind)
# The result kinds: "parser" (pairatt_parser pipelines: accuracy and speed), "ud_pipeline" (the UD pipeline of
# configs/pipeline_minilm.cfg), "transition" (spaCy's transition parser), "relations" (pairatt_rel), "bench"
# (bench/*.py on pairatt), "probe", "tokenizer" (tokenizer-eval), "segmenter", "footprint" (disk: stack, data, models).
RESULT_KINDS = frozenset(
    ("parser", "ud_pipeline", "transition", "relations", "bench", "probe", "tokenizer", "segmenter", "footprint")
)


@dataclass(frozen=True)
class CodeChange:
    """A change of the code after which results of the kinds it `affects` must be made again."""

    date: str  # ISO 8601, UTC: the commit's date
    commit: str
    what: str
    affects: FrozenSet[str]


CODE_CHANGES = tuple(
    CodeChange(change["date"], change["commit"], change["what"], frozenset(change["affects"]))
    for change in json.loads((Path(__file__).parent / "code_changes.json").read_text(encoding="utf8"))
)


@dataclass(frozen=True)
class Made:
    """When a results file was made, and how we know."""

    path: str
    date: Optional[str]  # ISO 8601
    recorded: bool  # True: the file's provenance; False: git's commit date (or unknown)
    kind: str

    def stale_since(self) -> Optional[CodeChange]:
        """The newest change of code behind this file that came after it was made."""
        made = self.date and datetime.fromisoformat(self.date)
        later = [c for c in CODE_CHANGES if made and self.kind in c.affects and datetime.fromisoformat(c.date) > made]
        return later[-1] if later else None


class MissingFigure(KeyError, ValueError):
    """A key that a results file lacks (made by an older command, or edited by hand): one line naming both."""

    def __str__(self) -> str:
        return self.args[0]


class ResultsObject(dict):
    """A JSON object of the results file `path`: a key it lacks raises `MissingFigure`."""

    def __init__(self, data: Dict, path: str):
        super().__init__(data)
        self.path = path

    def __missing__(self, key):
        raise MissingFigure(f"{self.path} has no {key!r}: re-run the command that makes it")


class Results:
    """The results folder of a checkout: JSON files read once, and when each was made."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._json: Dict[str, Optional[Dict]] = {}

    def json(self, path: str) -> Optional[Dict]:
        """The file's JSON, or None where it is not there (a run or row not made yet)."""
        if path not in self._json:
            file, as_object = self.root / path, lambda data: ResultsObject(data, path)
            self._json[path] = json.loads(file.read_text("utf8"), object_hook=as_object) if file.exists() else None
        return self._json[path]

    def made(self, path: str, kind: str) -> Made:
        if kind not in RESULT_KINDS:
            raise ValueError(f"unknown result kind {kind!r} for {path}: one of {sorted(RESULT_KINDS)}")
        created = ((self.json(path) or {}).get("provenance") or {}).get("created")
        return Made(path, created, True, kind) if created else Made(path, self.committed(path), False, kind)

    def committed(self, path: str) -> Optional[str]:
        """The date of the last commit that changed `path`, its move from results/ to projects/paper not counted."""
        paths = dict.fromkeys([path, path.removeprefix("projects/paper/")])  # -M: the move is a rename, filtered out
        command = ["git", "-C", str(self.root), "log", "-1", "-M", "--diff-filter=AM", "--format=%cI", "--", *paths]
        try:
            done = subprocess.run(command, capture_output=True, text=True)
        except OSError:
            return None
        return done.stdout.strip() or None


def source_note(results: Results, sources: Sources, command: str) -> str:
    """One paragraph: the files behind a block, when they were made, whether they are stale and `command`, what
    makes them again."""
    made = [results.made(path, kind) for path, kind in sources if results.json(path) is not None]
    missing = [path for path, _ in sources if results.json(path) is None]
    recorded, without = [m for m in made if m.recorded], [m for m in made if not m.recorded]
    parts = [f"Source: {file_list(made)}"] if made else []
    if recorded:
        who = f"{file_list(recorded)} " if without else ""
        parts.append(f"{who}made {date_span({m.date for m in recorded})} (provenance recorded)")
    if without:
        who, dates = f"{file_list(without)}: " if recorded else "", {m.date for m in without if m.date}
        parts.append(f"{who}**no provenance recorded**" + (f", committed {date_span(dates)}" if dates else ""))
    if missing:
        parts.append("not measured yet: " + ", ".join(f"`{path}`" for path in missing))
    text = "; ".join(parts) + "."
    stale = [m for m in made if m.stale_since() is not None]
    if stale:
        change = max((m.stale_since() for m in stale), key=lambda c: c.date)
        which = f" ({file_list(stale)})" if len(stale) <= 4 else f" ({len(stale)} of the {len(made)} files)"
        which = which if len(stale) < len(made) else ""
        when = f"{change.date[:10]}, {change.commit}"
        text += f" **Stale**{which}: made before {change.what} ({when}); re-run: `{command}`."
    return f"*{text}*\n"


def file_list(made: Sequence[Made]) -> str:
    return ", ".join(f"`{m.path}`" for m in made) if len(made) <= 4 else f"{len(made)} files under `results/`"


def date_span(dates) -> str:
    """The days of ISO dates, first to last."""
    days = sorted({date[:10] for date in dates})
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"


def speed_days_note(results: Results, sources: Sources) -> str:
    """A warning when a table's words/s were measured on different days: on the machine these runs share,
    the transformer alone has timed more than twice as fast one day as the day before, so only rows of one
    day compare."""
    days = sorted({made.date[:10] for made in (results.made(*source) for source in sources) if made.date})
    if len(days) < 2:
        return ""
    return (
        f"*words/s compare only between rows made on the same day (these: {', '.join(days)}); "
        "interleaved timings: projects/paper/results/bench.md.*\n\n"
    )
