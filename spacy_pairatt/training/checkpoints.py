"""Training checkpoints on disk, each written whole or not at all, and proven whole before a resume.

OUTPUT/checkpoints/step-00000120/   the state after 120 completed steps
    pipeline/          nlp.to_disk of the raw weights (not the optimizer's averages); spacy.load reads it
    optimizer.msgpack  the optimizer's state by stable parameter key (`optimizer_state.py`)
    random.msgpack     Python's, NumPy's and torch's random states (`random_state.py`)
    progress.json      step, epoch, score history, losses, elapsed time, the config
    COMPLETE           written last: every file's size and SHA-256

A checkpoint is written into `.step-00000120.partial-XXXXXXXX` beside the others, every file synced,
and renamed into place. Before a resume its files are checked against COMPLETE (`prove`): one
without COMPLETE, with a file missing, added, cut short or changed in a single byte is damaged and
never resumed from. A damaged checkpoint newer than the one resumed from is renamed aside
(`step-00000120.damaged`) and kept until the run writes a checkpoint at its step or later: what
was trained is never deleted on a guess. A checkpoint written before COMPLETE held SHA-256s (sizes
only) cannot be proven: it is resumed from, with a warning that same-size damage would go unseen.
"""

import fcntl
import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

from ..packaging.split_encoders import file_sha256
from ..runs.scratch import current_umask, naming_path, remove_path

CHECKPOINTS_DIR = "checkpoints"
# model-best kept beside checkpoints that live outside the output (--checkpoints): a fresh output gets it back
KEPT_BEST_DIR = "model-best"
KEPT_BEST_PARTIAL = f".{KEPT_BEST_DIR}.partial"
COMPLETION_MARKER = "COMPLETE"
LOCK_FILE = ".lock"
CHECKPOINT_NAME = re.compile(r"step-(\d+)")
SET_ASIDE_NAME = re.compile(r"step-(\d+)\.damaged(-\d+)?")
# a checkpoint being written or replaced: .step-N.partial-XXXXXXXX, .step-N.replaced-XXXXXXXX
SCRATCH_PREFIX = ".step-"
Read = TypeVar("Read")


class ResumeError(Exception):
    """A training that cannot start or resume as asked; the message is one line naming the problem."""


class CheckpointDamaged(Exception):
    """A checkpoint that must not be resumed from; the message says why, in a few words."""


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


def file_sizes(folder: Path) -> Dict[str, int]:
    """Each file under `folder` (relative path, / separated) → its size in bytes."""
    return {path.relative_to(folder).as_posix(): path.stat().st_size for path in folder.rglob("*") if path.is_file()}


def file_records(folder: Path) -> Dict[str, Dict]:
    """Each file under `folder` → its size and SHA-256, as COMPLETE records them."""
    return {
        name: {"bytes": size, "sha256": file_sha256(folder / name)} for name, size in sorted(file_sizes(folder).items())
    }


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


def marked_files(checkpoint: Path) -> Dict[str, Tuple[int, Optional[str]]]:
    """COMPLETE's record: each file → its size and SHA-256 (None in a checkpoint written before
    COMPLETE held them). CheckpointDamaged where it is missing or not such a record."""
    try:
        marker = json.loads((checkpoint / COMPLETION_MARKER).read_text(encoding="utf8"))
    except FileNotFoundError:
        raise CheckpointDamaged(f"no {COMPLETION_MARKER} (its write was cut short)") from None
    except (OSError, ValueError) as error:
        raise CheckpointDamaged(f"{COMPLETION_MARKER} cannot be read ({error})") from error
    files = marker.get("files") if isinstance(marker, dict) else None
    if isinstance(files, dict) and marker.get("step") == checkpoint_step(checkpoint):
        if all(type(record) is int for record in files.values()):
            return {name: (size, None) for name, size in files.items()}
        if all(isinstance(record, dict) and type(record.get("bytes")) is int and isinstance(record.get("sha256"), str)
               for record in files.values()):  # fmt: skip
            return {name: (record["bytes"], record["sha256"]) for name, record in files.items()}
    raise CheckpointDamaged(f"{COMPLETION_MARKER} is not this checkpoint's record of its files")


def checkpoint_step(checkpoint: Path) -> Optional[int]:
    match = CHECKPOINT_NAME.fullmatch(checkpoint.name)
    return int(match.group(1)) if match else None


def found_sizes(checkpoint: Path) -> Dict[str, int]:
    """The sizes of a checkpoint's files, COMPLETE left out."""
    return {name: size for name, size in file_sizes(checkpoint).items() if name != COMPLETION_MARKER}


def prove(checkpoint: Path) -> bool:
    """Check a checkpoint's files against COMPLETE: the same names, sizes and SHA-256s. True where
    SHA-256s proved them, False for a checkpoint written before COMPLETE held them (sizes checked
    only); CheckpointDamaged names the first file that differs."""
    expected = marked_files(checkpoint)
    try:
        found = found_sizes(checkpoint)
        missing, added = sorted(expected.keys() - found.keys()), sorted(found.keys() - expected.keys())
        if missing or added:
            raise CheckpointDamaged(f"{(missing or added)[0]} is {'missing' if missing else 'not one of its files'}")
        for name, (size, digest) in sorted(expected.items()):
            if found[name] != size:
                raise CheckpointDamaged(f"{name} is {found[name]} bytes, not the {size} written")
            if digest is not None and file_sha256(checkpoint / name) != digest:
                raise CheckpointDamaged(f"{name} is not the file written (its SHA-256 differs)")
    except OSError as error:
        raise CheckpointDamaged(f"cannot be read ({error})") from error
    return all(digest is not None for _, digest in expected.values())


def looks_complete(checkpoint: Path) -> bool:
    """COMPLETE is there and names the files there at their sizes: the cheap check (no hashing) that
    decides which checkpoints the newest `keep` are."""
    try:
        expected = marked_files(checkpoint)
    except CheckpointDamaged:
        return False
    return found_sizes(checkpoint) == {name: size for name, (size, _) in expected.items()}


def checkpoint_steps(root: Path) -> List[int]:
    """The steps of the checkpoint folders under `root`, complete or not, newest first."""
    if not root.is_dir():
        return []
    steps = (checkpoint_step(path) for path in root.iterdir() if path.is_dir())
    return sorted((step for step in steps if step is not None), reverse=True)


def set_aside_checkpoints(root: Path) -> List[Path]:
    """The damaged checkpoints a resume renamed aside and has not passed yet."""
    return sorted(path for path in root.iterdir() if SET_ASIDE_NAME.fullmatch(path.name)) if root.is_dir() else []


def newest_readable(root: Path, read: Callable[[Path], Read]) -> Tuple[Optional[Read], List[Tuple[Path, str]]]:
    """What `read` gives for the newest checkpoint under `root` it reads without CheckpointDamaged
    (None: none), and each newer one with the reason it is damaged, newest first."""
    damaged = []
    for step in checkpoint_steps(root):
        checkpoint = root / checkpoint_name(step)
        try:
            return read(checkpoint), damaged
        except CheckpointDamaged as reason:
            damaged.append((checkpoint, str(reason)))
    return None, damaged


def set_aside(checkpoint: Path) -> Path:
    """Rename a damaged checkpoint to step-N.damaged (or .damaged-2, ...), where no resume reads it
    and no cleanup removes it until a run passes step N; the new path."""
    target, number = checkpoint.with_name(f"{checkpoint.name}.damaged"), 1
    while os.path.lexists(target):
        number += 1
        target = checkpoint.with_name(f"{checkpoint.name}.damaged-{number}")
    checkpoint.rename(target)
    return target


def write_checkpoint(root: Path, step: int, write: Callable[[Path], None], keep: int) -> Path:
    """Have `write` fill a temporary folder, mark it complete, rename it to step-N; keep the newest `keep`.
    An error of the disk (a full one) names the checkpoint."""
    target = root / checkpoint_name(step)
    with naming_path(target):
        partial = Path(tempfile.mkdtemp(prefix=f".{checkpoint_name(step)}.partial-", dir=root))
        os.chmod(partial, 0o777 & ~current_umask())  # mkdtemp's folder is the user's alone
        write(partial)
        marker = {"step": step, "files": file_records(partial)}
        (partial / COMPLETION_MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True), encoding="utf8")
        sync_tree(partial)
    if target.exists():  # the same step written again (a finished run rerun): the new one replaces it whole
        replaced = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-", dir=root))
        target.rename(replaced / target.name)
        partial.rename(target)
        shutil.rmtree(replaced)
    else:
        partial.rename(target)
    sync_path(root)
    remove_older_checkpoints(root, keep, step)
    return target


def remove_older_checkpoints(root: Path, keep: int, newest: int) -> None:
    """Leave the newest `keep` complete checkpoints; remove the rest, incomplete ones, the set-aside
    ones the run has passed (step `newest` written) and leftovers of killed writes."""
    kept = 0
    for step in checkpoint_steps(root):
        checkpoint = root / checkpoint_name(step)
        if kept < keep and looks_complete(checkpoint):
            kept += 1
        else:
            shutil.rmtree(checkpoint)
    for aside in set_aside_checkpoints(root):
        if int(SET_ASIDE_NAME.fullmatch(aside.name).group(1)) <= newest:
            shutil.rmtree(aside)
    for leftover in root.glob(f"{SCRATCH_PREFIX}*"):
        shutil.rmtree(leftover)


def remove_all_checkpoints(root: Path) -> None:
    """Every checkpoint under `root`, set-aside and partial ones too, and the run's kept model-best (a
    training started over); nothing else: `root` may be a folder the user named (--checkpoints)."""
    for path in root.iterdir():
        if (
            CHECKPOINT_NAME.fullmatch(path.name)
            or SET_ASIDE_NAME.fullmatch(path.name)
            or path.name.startswith(SCRATCH_PREFIX)
            or path.name in (KEPT_BEST_DIR, KEPT_BEST_PARTIAL)
        ):
            remove_path(path)


def keep_best(best: Path, kept: Path) -> None:
    """`kept` (root/KEPT_BEST_DIR) becomes a copy of the run's model-best, copied beside it first: a
    stop while it copies leaves the old one whole."""
    partial = kept.with_name(KEPT_BEST_PARTIAL)
    remove_path(partial)
    shutil.copytree(best, partial)
    remove_path(kept)
    os.replace(partial, kept)


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
