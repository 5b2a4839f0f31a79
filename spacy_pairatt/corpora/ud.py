"""UD English-EWT 2.16: linked from a local copy when there is one, else the official release.

The files are checked against the SHA-256 of the UD 2.16 release (commit 15d613d8 of
UniversalDependencies/UD_English-EWT), so a run elsewhere trains on exactly the same data.
"""

from pathlib import Path
from typing import Optional

from .files import fetch_checked

UD_EWT_COMMIT = "15d613d8447b3478787d4c278730a1e48a945efb"
UD_EWT_URL = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/{commit}/{name}"
UD_EWT_FILES = {
    "en_ewt-ud-train.conllu": "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b",
    "en_ewt-ud-dev.conllu": "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
    "en_ewt-ud-test.conllu": "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd",
}


def fetch_ud_ewt(dest: Path, local_dir: Optional[Path] = None) -> None:
    """Put the three EWT files in `dest`: symlinks into `local_dir` if it has them, else downloads."""
    urls = {name: UD_EWT_URL.format(commit=UD_EWT_COMMIT, name=name) for name in UD_EWT_FILES}
    fetch_checked(dest, {name: (urls[name], expected) for name, expected in UD_EWT_FILES.items()}, local_dir)
