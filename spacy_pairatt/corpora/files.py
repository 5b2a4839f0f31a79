"""Corpus files in and out: a local copy or a pinned download, checksummed; Docs out as .spacy files."""

import hashlib
import shutil
import urllib.request
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Tuple

from spacy.tokens import Doc, DocBin

from ..runs.scratch import naming_path


def sha256_lf(path: Path) -> str:
    """SHA-256 of the content with CRLF read as LF: official CRLF releases and LF mirrors check alike."""
    return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()


DOWNLOAD_TIMEOUT = 120  # seconds without data before a download is given up


def fetch_checked(dest: Path, files: Mapping[str, Tuple[str, str]], local_dir: Optional[Path] = None) -> None:
    """Put each file (relative path -> (url, sha256_lf)) under `dest`: a symlink into `local_dir` when
    it has the file, else a download from `url` (the official source, pinned); either way the checksum
    must match, or a one-line ValueError names the file and nothing is left at its place."""
    for name, (url, expected) in files.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        source = local_dir / name if local_dir is not None else None
        if source is not None and source.exists():
            target.symlink_to(source.resolve())
            how = f"linked from {source}"
        else:
            download(url, target)
            how = f"downloaded from {url}"
        actual = sha256_lf(target)
        if actual != expected:
            target.unlink()
            raise ValueError(checksum_error(name, how, actual, expected))
        print(f"{name}: {how}, checksum ok")


def download(url: str, target: Path) -> None:
    """`url` into `target`, by way of a partial file beside it: an interrupted download leaves no `target`."""
    partial = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response, partial.open("wb") as file:
            with naming_path(target):
                shutil.copyfileobj(response, file)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def checksum_error(name: str, how: str, actual: str, expected: str) -> str:
    """One line: which file, where it came from, and the two checksums."""
    return f"{name} ({how}) failed its checksum: SHA-256 {actual} (CRLF read as LF), expected {expected}"


def write_docbins(splits: Mapping[str, Iterable[Doc]], out_dir: Path) -> Dict[str, Path]:
    """One OUT_DIR/NAME.spacy per split, with user_data (where relations and ids live)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, docs in splits.items():
        docbin = DocBin(store_user_data=True, docs=docs)
        paths[name] = out_dir / f"{name}.spacy"
        with naming_path(paths[name]):
            docbin.to_disk(paths[name])
        print(f"{paths[name]}: {len(docbin)} docs")
    return paths
