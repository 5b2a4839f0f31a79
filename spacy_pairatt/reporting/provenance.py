"""Where a results file came from: code commit, library versions, command, seed, time and cores.

Every writer of a results JSON (evaluate, the relation evaluations and table, the ablation rows and
table, the probe, the bench scripts) adds `"provenance": provenance(...)`; evaluations of a saved
pipeline add `"model": model_provenance(nlp, path)` (its config's hash, training seed and steps).
"""

import functools
import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Dict, List, Optional

LIBRARIES = ("spacy", "spacy-transformers", "thinc", "torch", "transformers", "spacy-pairatt")
# The tracked paths whose changes make the code "dirty": not results/, README.md or docs/, which the
# project commands themselves rewrite; the paper's study and benches (projects/paper) run code as well.
CODE_PATHS = ("spacy_pairatt", "scripts", "configs", "setup.py", "project.yml",
              "projects/paper/pairatt_paper", "projects/paper/bench", "projects/paper/project.yml")  # fmt: skip
SOURCE_ROOT = Path(__file__).resolve().parents[2]
# A copy of the checkout (a GPU machine gets the working tree, with no .git or a stale one) names its
# commit through a stamp written here by `python -m spacy_pairatt source-stamp`; this variable gives its path.
SOURCE_STAMP_ENV = "SPACY_PAIRATT_SOURCE_STAMP"
_IMPORTED = time.time()


def provenance(
    seed: Optional[int] = None,
    started: Optional[float] = None,
    command: Optional[str] = None,
    code: Optional[Dict] = None,
) -> Dict:
    """This run's provenance, for the results JSON it is about to write.

    seed: the seed the results depend on (a training seed, a sampling seed; None where there is none).
    started: `time.time()` when the work began; `wall_seconds` runs from there to now (default: from
    the start of the process). command: default the process's command line (`command_as_typed()`).
    code: `code_version()` taken when the work began (default: `code_at_start()`, which the command
    line calls as a command starts); a checkout can move on during a long run, and the code that counts
    is the code the process loaded, not the checkout's state when the results are written.
    """
    now = time.time()
    start = process_start() if started is None else started
    return {
        "code": code or code_at_start(),
        "versions": {"python": platform.python_version(), **library_versions()},
        "command": command or command_as_typed(),
        "seed": seed,
        "created": datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds"),
        "wall_seconds": round(now - start, 1),
        **machine(),
    }


def library_versions(names=LIBRARIES) -> Dict[str, Optional[str]]:
    """Installed versions by distribution name (None for one that is not installed)."""
    versions = {}
    for name in names:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return versions


def code_version(root: Path = SOURCE_ROOT) -> Dict:
    """The git commit of the checkout this package runs from, and whether its code differs from it.

    commit None: not run from a git checkout of this project (an installed wheel). dirty: tracked or
    untracked changes under CODE_PATHS (their paths in `dirty_paths`, at most 20). Where the
    environment names a source stamp, the copy is checked against it (`stamped_code_version`) and
    .git is not read: a GPU machine's copy once carried a .git of an older commit, and named that
    commit with the newer code as its dirty files.
    """
    if (root / "setup.py").is_file() and os.environ.get(SOURCE_STAMP_ENV):
        return stamped_code_version(root, Path(os.environ[SOURCE_STAMP_ENV]))
    return git_code_version(root)


@functools.cache
def code_at_start() -> Dict:
    """`code_version()` at this process's first call, the same at every later one: Python keeps the
    modules it imported, whatever the checkout becomes. `python -m spacy_pairatt` calls it as a
    command that writes results starts, not at import (importing runs no git)."""
    return code_version()


def git_code_version(root: Path) -> Dict:
    """code_version as git sees the checkout, whatever the environment names."""
    if not (root / ".git").exists() or not (root / "setup.py").is_file():
        return {"commit": None, "dirty": None, "dirty_paths": []}
    commit = _git(root, "rev-parse", "HEAD")
    commit = commit and commit.strip()
    status = _git(root, "status", "--porcelain", "--untracked-files=normal", "--", *CODE_PATHS)
    if commit is None or status is None:
        return {"commit": commit, "dirty": None, "dirty_paths": []}
    paths = sorted(line[3:] for line in status.splitlines() if line.strip())
    return {"commit": commit, "dirty": bool(paths), "dirty_paths": paths[:20]}


def source_stamp(root: Path = SOURCE_ROOT) -> Dict:
    """The commit of a clean checkout and the SHA-256 of each file git tracks under CODE_PATHS, for a
    copy of its tree to name its commit by (`stamped_code_version`). A dirty checkout has no
    commit to name, so it is refused. Read from git, not from a stamp the environment may name."""
    code = git_code_version(root)
    if code["commit"] is None or code["dirty"] is not False:
        raise ValueError(f"a source stamp needs a clean git checkout of the project; {root} is {code}")
    names = _listed_files(root, CODE_PATHS) or []
    return {"commit": code["commit"], "files": {name: _sha256(root / name) for name in names}}


def stamped_code_version(root: Path, stamp_path: Path) -> Dict:
    """code_version for a copy of the tree: the stamp's commit, dirty where a stamped file's content
    differs or is missing. Files added to the copy are not seen (git does not list them here), which
    the record says (`"checked": "source stamp"`)."""
    try:
        stamp = json.loads(Path(stamp_path).read_text(encoding="utf8"))
        commit, files = stamp["commit"], stamp["files"]
        if not isinstance(commit, str) or not isinstance(files, dict):
            raise TypeError("'commit' must be a string and 'files' an object of paths and SHA-256s")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{SOURCE_STAMP_ENV}={stamp_path}: not a source stamp ({error})") from error
    changed = sorted(name for name, digest in files.items() if _sha256(root / name) != digest)
    return {"commit": commit, "dirty": bool(changed), "dirty_paths": changed[:20], "checked": "source stamp"}


def _sha256(path: Path) -> Optional[str]:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def code_fingerprint(paths=CODE_PATHS, root: Path = SOURCE_ROOT) -> Optional[str]:
    """SHA-256 over the names and contents of the files under `paths` that git tracks or would track,
    as they are in the working tree: the code a run used, committed or not (two runs with the same
    fingerprint ran the same code). None outside a git checkout."""
    names = _listed_files(root, paths, "--cached", "--others", "--exclude-standard")
    if names is None:
        return None
    digest = hashlib.sha256()
    for name in names:
        path = root / name
        if path.is_file():  # a tracked file deleted in the working tree is left out
            digest.update(name.encode("utf8") + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _listed_files(root: Path, paths, *options: str) -> Optional[List[str]]:
    """The sorted, distinct paths `git ls-files OPTIONS -- PATHS` lists (None where git cannot)."""
    listed = _git(root, "ls-files", "-z", *options, "--", *paths)
    return None if listed is None else sorted(set(filter(None, listed.split("\0"))))


def _git(root: Path, *args: str) -> Optional[str]:
    try:
        result = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def command_as_typed(argv: Optional[List[str]] = None) -> str:
    """The command as typed: `python -m PACKAGE ...` for a package's __main__, else `python SCRIPT ...`."""
    argv = list(sys.argv if argv is None else argv)
    if not argv or not argv[0]:
        return "python"
    program = Path(argv[0])
    if argv[0] == "-c":
        head = ["python", "-c"]
    elif program.name == "__main__.py":
        head = ["python", "-m", program.parent.name]
    elif program.suffix == ".py":
        head = ["python", os.path.relpath(program) if program.is_absolute() else str(program)]
    else:
        head = [program.name]
    return shlex.join(head + argv[1:])


def machine() -> Dict:
    """Cores this process may run on, the machine's count, its malloc (memory and speed depend on it:
    integration/memory.py) and torch's threads (when torch is loaded)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    from ..integration.memory import allocator_name  # imports spaCy: only where a machine is described

    info = {"cores": cores, "cpu_count": os.cpu_count(), "allocator": allocator_name()}
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = bool(torch.cuda.is_available())
    return info


def process_start() -> float:
    """The process's start as `time.time()` (Linux /proc; elsewhere when this module was imported)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime, counted after the ")" that ends field 2
        boot = next(
            int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
        )
        start = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration, AttributeError):
        return _IMPORTED
    # btime has one-second resolution: never report a start after this module's import.
    return min(start, _IMPORTED)


def model_provenance(nlp, path) -> Dict:
    """What trained a saved pipeline: the SHA-256 of its config.cfg, its training seed, steps and encoder."""
    config_file = Path(path) / "config.cfg"
    text = config_file.read_bytes() if config_file.is_file() else nlp.config.to_str().encode("utf8")
    config = nlp.config.interpolate()
    training = config.get("training", {})
    encoder = None
    for component in config.get("components", {}).values():
        model = component.get("model", {}) if isinstance(component, dict) else {}
        if isinstance(model, dict) and "name" in model and "transformer" in str(component.get("factory", "")):
            encoder = model["name"]
            if isinstance(encoder, dict):  # a registered function that finds the weights
                encoder = next((str(v) for k, v in encoder.items() if k.startswith("@")), str(encoder))
            break
    return {
        "path": str(path),
        "config_sha256": hashlib.sha256(text).hexdigest(),
        "seed": training.get("seed"),
        "max_steps": training.get("max_steps"),
        "encoder": encoder,
        "spacy_version": nlp.meta.get("spacy_version"),
    }
