"""Fetching UD English-EWT: local copies are linked and checked against the release checksums."""

import pytest

from spacy_pairatt.corpora.ud import UD_EWT_FILES, fetch_ud_ewt
from tests.conftest import UD_DIR


def test_local_copy_is_linked_and_verified(tmp_path):
    if not all((UD_DIR / name).exists() for name in UD_EWT_FILES):
        pytest.skip(f"UD English-EWT not found at {UD_DIR}")
    fetch_ud_ewt(tmp_path / "ud", UD_DIR)
    for name in UD_EWT_FILES:
        assert (tmp_path / "ud" / name).is_symlink()
        assert (tmp_path / "ud" / name).resolve() == (UD_DIR / name).resolve()


def test_a_changed_file_is_rejected(tmp_path):
    local = tmp_path / "local"
    local.mkdir()
    for name in UD_EWT_FILES:
        (local / name).write_text("# not the release\n")
    with pytest.raises(ValueError, match="SHA-256"):
        fetch_ud_ewt(tmp_path / "ud", local)
