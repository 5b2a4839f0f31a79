"""Training checkpoints on disk, each written whole or not at all.

OUTPUT/checkpoints/step-00000120/   the state after 120 completed steps
    pipeline/          nlp.to_disk of the raw weights (not the optimizer's averages); spacy.load reads it
    optimizer.msgpack  the optimizer's state by stable parameter key (`optimizer_state.py`)
    random.msgpack     Python's, NumPy's and torch's random states (`random_state.py`)
    progress.json      step, epoch, score history, losses, elapsed time, the config
    COMPLETE           written last: every file's size

A checkpoint is written into `.step-00000120.partial-XXXXXXXX` beside the others, every file synced,
and renamed into place. One without COMPLETE, or whose files differ in size from it (cut short), is
never resumed from.
"""

import fcntl
import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional

CHECKPOINTS_DIR = "checkpoints"
COMPLETION_MARKER = "COMPLETE"
LOCK_FILE = ".lock"
CHECKPOINT_NAME = re.compile(r"step-(\d+)")


class ResumeError(Exception):
    """A training that cannot start or resume as asked; the message is one line naming the problem."""


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


def file_sizes(folder: Path) -> Dict[str, int]:
    """Each file under `folder` (relative path, / separated) → its size in bytes."""
    return {path.relative_to(folder).as_posix(): path.stat().st_size for path in folder.rglob("*") if path.is_file()}


def sync_tree(folder: Path) -> None:
    """Flush every file and folder under `folder` to the disk, `folder` itself last."""
    for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        sync_path(path)
    sync_path(folder)


def sync_path(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def is_complete(checkpoint: Path) -> bool:
    """Whether COMPLETE is there and names exactly the files there, at their sizes."""
    try:
        expected = json.loads((checkpoint / COMPLETION_MARKER).read_text(encoding="utf8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    found = file_sizes(checkpoint)
    found.pop(COMPLETION_MARKER, None)
    return found == expected


def checkpoint_steps(root: Path) -> List[int]:
    """The steps of the checkpoint folders under `root`, complete or not, newest first."""
    if not root.is_dir():
        return []
    matches = (CHECKPOINT_NAME.fullmatch(path.name) for path in root.iterdir() if path.is_dir())
    return sorted((int(match.group(1)) for match in matches if match), reverse=True)


def latest_checkpoint(root: Path, warn: Callable[[str], None]) -> Optional[Path]:
    """The newest complete checkpoint under `root`; each newer incomplete one is named to `warn`."""
    for step in checkpoint_steps(root):
        checkpoint = root / checkpoint_name(step)
        if is_complete(checkpoint):
            return checkpoint
        warn(f"{checkpoint}: incomplete (no {COMPLETION_MARKER} or files cut short), not resumed from")
    return None


def write_checkpoint(root: Path, step: int, write: Callable[[Path], None], keep: int) -> Path:
    """Have `write` fill a temporary folder, mark it complete, rename it to step-N; keep the newest `keep`."""
    partial = Path(tempfile.mkdtemp(prefix=f".{checkpoint_name(step)}.partial-", dir=root))
    write(partial)
    marker = {"step": step, "files": file_sizes(partial)}
    (partial / COMPLETION_MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True), encoding="utf8")
    sync_tree(partial)
    target = root / checkpoint_name(step)
    if target.exists():  # the same step written again (a finished run rerun): the new one replaces it whole
        replaced = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-", dir=root))
        target.rename(replaced / target.name)
        partial.rename(target)
        shutil.rmtree(replaced)
    else:
        partial.rename(target)
    sync_path(root)
    remove_older_checkpoints(root, keep)
    return target


def remove_older_checkpoints(root: Path, keep: int) -> None:
    """Leave the newest `keep` complete checkpoints; remove the rest, incomplete ones and leftovers of killed writes."""
    kept = 0
    for step in checkpoint_steps(root):
        checkpoint = root / checkpoint_name(step)
        if kept < keep and is_complete(checkpoint):
            kept += 1
        else:
            shutil.rmtree(checkpoint)
    for leftover in root.glob(".step-*"):
        shutil.rmtree(leftover)


@contextmanager
def exclusive_checkpoints(root: Path) -> Iterator[Path]:
    """`root` created and held by this process: a second training into the same output is refused."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / LOCK_FILE).open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ResumeError(f"{root}: another training is writing checkpoints here") from None
        yield root
