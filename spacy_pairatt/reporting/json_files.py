"""The project's JSON files: results (with provenance), training records and per-sentence counts.

One writer, so that every file is UTF-8, ends in a newline and has its folder made for it.
"""

import json
from pathlib import Path
from typing import Any, Optional, Union

from ..runs.scratch import naming_path

PathLike = Union[str, Path]


def json_text(data: Any, *, compact: bool = False, sort_keys: bool = False) -> str:
    """`data` as JSON: indented for reading and diffs, or `compact` (one line, no spaces) for the
    per-sentence counts only code reads."""
    layout = {"separators": (",", ":")} if compact else {"indent": 2}
    return json.dumps(data, ensure_ascii=False, sort_keys=sort_keys, **layout)


def write_json(path: PathLike, data: Any, *, compact: bool = False, sort_keys: bool = False) -> str:
    """Write `data` to `path` as `json_text` does and return the text."""
    text = json_text(data, compact=compact, sort_keys=sort_keys)
    write_text(path, text + "\n")
    return text


def write_text(path: PathLike, text: str) -> None:
    """Write `text` to `path` as UTF-8, its folder made. A failed write (a full disk, /dev/full) names
    the path: the OSError of write() itself has none, and the command's one-line error shows it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with naming_path(path):
        path.write_text(text, encoding="utf8")


def read_json(path: PathLike) -> Optional[Any]:
    """The JSON at `path`, or None where there is no file (a run or row not made yet)."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf8")) if path.exists() else None
