"""Scratch files and folders: what a command writes goes there first, then into place by rename.

A scratch path sits beside its target and names it and the process that writes it:
`.NAME.KIND-PID-XXXXXXXX` (KIND: partial, staging, parts, previous, discarded). A run removes what
it made, whatever stops it (`spacy_pairatt.runs.signals`); what a killed run left (SIGKILL, a power cut)
is removed by the next run that writes the same target, once no process of that id runs on this
machine. Nothing else is ever removed: the pattern, the process id and the eight hex digits are
the proof that a path is scratch.
"""

import ctypes
import errno
import os
import re
import secrets
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, List, Optional

from .signals import stop_signals_held

SCRATCH_KINDS = ("partial", "staging", "parts", "previous", "discarded")
SCRATCH_NAME = re.compile(r"\.(?P<target>.+)\.(?P<kind>{})-(?P<pid>\d+)-[0-9a-f]{{8}}".format("|".join(SCRATCH_KINDS)))
AT_FDCWD, RENAME_EXCHANGE = -100, 2  # fcntl.h, linux/fs.h
RUST_IO_ERROR = re.compile(r"\(os error (\d+)\)$")  # how Rust's std::io::Error ends its message


def scratch_path(target: Path, kind: str) -> Path:
    """A new scratch path of `target`, beside it, owned by this process."""
    return target.parent / f".{target.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"


def renamed_scratch(path: Path, kind: str) -> Path:
    """The same scratch path under another kind (a staging folder being discarded)."""
    match = SCRATCH_NAME.fullmatch(path.name)
    return path.with_name(f".{match['target']}.{kind}{path.name[match.end('kind') :]}")


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


@contextmanager
def naming_path(path: Path) -> Iterator[None]:
    """An OSError without a file name raised in the block (a full disk: write() names none) raised
    again naming `path`, so that the command's one-line error says where; so is an I/O error of a
    library in Rust, which is no OSError (Hugging Face's tokenizers: "File too large (os error 27)")."""
    try:
        yield
    except OSError as error:
        if error.filename is not None or error.errno is None:
            raise
        raise OSError(error.errno, error.strerror or str(error), str(path)) from error
    except Exception as error:
        code = RUST_IO_ERROR.search(str(error))
        if code is None:
            raise
        raise OSError(int(code[1]), os.strerror(int(code[1])), str(path)) from error


def remove_path(path: Path) -> None:
    """Remove a file or a folder tree; one that is already gone is no error."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_stale_scratch(target: Path) -> List[Path]:
    """Remove the scratch of `target` left by killed runs (their process is gone); the paths removed.

    A folder kept aside as `previous` while it was being replaced is put back in place of a
    `target` that is missing (the run was killed between its two renames)."""
    if not target.parent.is_dir():
        return []
    stale = []
    for entry in target.parent.iterdir():
        match = SCRATCH_NAME.fullmatch(entry.name)
        if match is None or match["target"] != target.name:
            continue
        pid = int(match["pid"])
        if pid == os.getpid() or process_alive(pid):
            continue
        if match["kind"] == "previous" and not os.path.lexists(target):
            entry.rename(target)
            continue
        remove_path(entry)
        stale.append(entry)
    return stale


def libc() -> Optional[ctypes.CDLL]:
    return ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None


def exchange(first: Path, second: Path) -> bool:
    """Swap two existing paths in one step (Linux's renameat2 with RENAME_EXCHANGE); False where the
    system or the file system cannot, an OSError for any other failure."""
    renameat2 = getattr(libc(), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def swap_into_place(new: Path, target: Path) -> Optional[Path]:
    """Put the folder `new` at `target`; the path that now holds the folder it replaced, if any.

    Atomic where `exchange` works; elsewhere two renames (the caller holds stop signals), and a kill
    between them leaves the old folder as `previous` scratch, which the next run puts back."""
    if not os.path.lexists(target):
        new.rename(target)
        return None
    if exchange(new, target):
        return new
    previous = scratch_path(target, "previous")
    target.rename(previous)
    try:
        new.rename(target)
    except BaseException:
        previous.rename(target)
        raise
    return previous


def replace_folder(target: Path, write: Callable[[Path], None]) -> None:
    """`write(folder)` into a staging folder beside `target`, then that folder in place of `target`:
    whenever the run stops, `target` is the old folder or the new one, never a mix. An error of the
    disk (a full one) names `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(target)
    staging = scratch_path(target, "staging")
    leftover: Optional[Path] = staging
    try:
        staging.mkdir()
        with naming_path(target):
            write(staging)
        with stop_signals_held():
            leftover = swap_into_place(staging, target)
    finally:
        with stop_signals_held():  # a stop is taken once the scratch is gone
            if leftover is not None:
                remove_path(leftover)


def check_pipeline_folder(output: Path) -> None:
    """An existing `output` must be a pipeline folder (it has config.cfg) or empty: anything else is
    a ValueError, not something to replace."""
    if output.exists() and not output.is_dir():
        raise ValueError(f"{output} exists and is not a folder")
    if output.is_dir() and any(output.iterdir()) and not (output / "config.cfg").is_file():
        raise ValueError(f"{output} holds files but no pipeline (no config.cfg): not replacing it")


def replace_pipeline_folder(output: Path, write: Callable[[Path], None]) -> None:
    """replace_folder for a spaCy pipeline, where `output` passes check_pipeline_folder. A link is
    followed: the pipeline it names is replaced and the link kept, as `parse --output LINK` writes
    through a link (replacing the link by a folder would leave the pipeline it names as it was)."""
    output = Path(os.path.realpath(output))
    check_pipeline_folder(output)
    replace_folder(output, write)
