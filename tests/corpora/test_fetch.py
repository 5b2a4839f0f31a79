"""The fetch path without a local copy: downloads from the pinned official URLs, checksummed, through a
file:// URL or a patched opener (no network in tests)."""

import io
import subprocess
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from weasel.util import load_project_config

from spacy_pairatt.corpora.docred import DOCRED_FILES, fetch_docred
from spacy_pairatt.corpora.files import fetch_checked, sha256_lf
from spacy_pairatt.corpora.ptb import FILE_PATTERN, PTB_ZIP_URL, TREEBANK_DIR, fetch_ptb
from spacy_pairatt.corpora.semeval import SEMEVAL_FILES, fetch_semeval
from spacy_pairatt.corpora.ud import UD_EWT_COMMIT, UD_EWT_FILES, fetch_ud_ewt
from tests.conftest import DATA, REPO

CRLF_TEXT = b'1\t"The <e1>cat</e1> sat."\r\nOther\r\n'


@pytest.fixture
def served(tmp_path):
    """A file and its file:// URL."""
    source = tmp_path / "server" / "release.txt"
    source.parent.mkdir()
    source.write_bytes(CRLF_TEXT)
    return source, source.as_uri()


def patched_opener(monkeypatch, content_by_url):
    """urllib.request.urlopen answering from `content_by_url` (bytes, or a callable of the URL); the URLs
    asked for, in order."""
    asked = []

    def urlopen(url, timeout=None):
        asked.append(url)
        content = content_by_url(url) if callable(content_by_url) else content_by_url[url]
        return io.BytesIO(content)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return asked


def no_leftovers(folder: Path):
    return [path.name for path in folder.rglob("*") if path.is_file() or path.is_symlink()]


def test_downloads_from_a_file_url_when_there_is_no_local_copy(served, tmp_path):
    source, url = served
    fetch_checked(tmp_path / "out", {"data/release.txt": (url, sha256_lf(source))})
    target = tmp_path / "out" / "data" / "release.txt"
    assert not target.is_symlink() and target.read_bytes() == CRLF_TEXT
    assert no_leftovers(tmp_path / "out") == ["release.txt"]  # no .part file


def test_a_local_folder_without_the_file_falls_back_to_the_download(served, tmp_path, capsys):
    source, url = served
    (tmp_path / "local").mkdir()
    fetch_checked(tmp_path / "out", {"release.txt": (url, sha256_lf(source))}, tmp_path / "local")
    assert not (tmp_path / "out" / "release.txt").is_symlink()
    assert f"release.txt: downloaded from {url}, checksum ok" in capsys.readouterr().out


def test_a_checksum_mismatch_is_one_line_naming_the_file_and_leaves_nothing(served, tmp_path):
    _, url = served
    with pytest.raises(ValueError) as error:
        fetch_checked(tmp_path / "out", {"data/release.txt": (url, "0" * 64)})
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"data/release.txt (downloaded from {url}) failed its checksum: SHA-256 ")
    assert message.endswith(f"expected {'0' * 64}")
    assert no_leftovers(tmp_path / "out") == []


def test_a_changed_local_copy_is_not_left_linked(served, tmp_path):
    source, _ = served
    with pytest.raises(ValueError, match=r"^release.txt \(linked from .*release.txt\) failed its checksum"):
        fetch_checked(tmp_path / "out", {"release.txt": ("unused://", "0" * 64)}, source.parent)
    assert no_leftovers(tmp_path / "out") == [] and source.exists()


def test_a_failed_download_leaves_nothing(tmp_path, monkeypatch):
    def offline(url, timeout=None):
        raise urllib.error.URLError("no network in this test")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(urllib.error.URLError):
        fetch_checked(tmp_path / "out", {"release.txt": ("https://example.org/release.txt", "0" * 64)})
    assert no_leftovers(tmp_path / "out") == []


@pytest.mark.parametrize(
    "fetch, files, first",
    [
        (fetch_ud_ewt, UD_EWT_FILES, "en_ewt-ud-train.conllu"),
        (fetch_semeval, SEMEVAL_FILES, next(iter(SEMEVAL_FILES))),
        (fetch_docred, DOCRED_FILES, "dev_revised.json"),
    ],
)
def test_each_dataset_downloads_its_pinned_files_and_checks_them(fetch, files, first, tmp_path, monkeypatch):
    """Without --local, every dataset asks for its pinned URLs; content that is not the release is refused."""
    asked = patched_opener(monkeypatch, lambda url: b"not the release\n")
    with pytest.raises(ValueError, match=rf"^{first} \(downloaded from https://raw.githubusercontent.com/.*\) failed"):
        fetch(tmp_path / "out")
    assert asked[0].startswith("https://raw.githubusercontent.com/") and asked[0].endswith(first)
    if fetch is fetch_ud_ewt:
        assert UD_EWT_COMMIT in asked[0]


LOCAL_COPIES = {
    fetch_ud_ewt: (DATA / "ud_english_ewt", {name: None for name in UD_EWT_FILES}),
    fetch_semeval: (DATA / "semeval2010_task8", SEMEVAL_FILES),
    fetch_docred: (DATA / "docred" / "re-docred", DOCRED_FILES),
}


@pytest.mark.parametrize("fetch", list(LOCAL_COPIES), ids=["ud", "semeval", "docred"])
def test_the_release_served_as_a_download_passes(fetch, tmp_path, monkeypatch):
    """The shared copy served from the official URLs, as a machine without ../shared/data gets it."""
    local, files = LOCAL_COPIES[fetch]
    if not all((local / name).exists() for name in files):
        pytest.skip(f"no local copy at {local} to serve")
    by_name = {url.rsplit("/", 1)[1]: url for url in urls_of(fetch)}
    content = {url: (local / name).read_bytes() for name in files for url in [by_name[Path(name).name]]}
    asked = patched_opener(monkeypatch, content)
    fetch(tmp_path / "out")
    assert sorted(asked) == sorted(content)
    for name in files:
        assert not (tmp_path / "out" / name).is_symlink() and sha256_lf(tmp_path / "out" / name)


def urls_of(fetch):
    if fetch is fetch_ud_ewt:
        from spacy_pairatt.corpora.ud import UD_EWT_URL

        return [UD_EWT_URL.format(commit=UD_EWT_COMMIT, name=name) for name in UD_EWT_FILES]
    return [url for url, _ in (SEMEVAL_FILES if fetch is fetch_semeval else DOCRED_FILES).values()]


def ptb_zip(files) -> bytes:
    """nltk_data's dependency_treebank.zip layout: dependency_treebank/wsj_*.dp."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in files:
            archive.write(path, f"{TREEBANK_DIR}/{path.name}")
    return buffer.getvalue()


def test_ptb_is_unpacked_from_the_pinned_zip_and_checked(tmp_path, monkeypatch):
    shipped = sorted((DATA / "ptb_sample" / TREEBANK_DIR).glob(FILE_PATTERN))
    if not shipped:
        pytest.skip("PTB sample not found to serve")
    asked = patched_opener(monkeypatch, {PTB_ZIP_URL: ptb_zip(shipped)})
    fetch_ptb(tmp_path / "ptb")
    unpacked = sorted((tmp_path / "ptb" / TREEBANK_DIR).iterdir())
    assert asked == [PTB_ZIP_URL] and len(unpacked) == len(shipped) == 199
    assert not any(path.is_symlink() for path in unpacked)


def test_a_ptb_zip_that_is_not_the_release_is_refused_and_removed(tmp_path, monkeypatch):
    fake = tmp_path / "wsj_0001.dp"
    fake.write_text("Pierre\tNNP\t2\n", encoding="utf8")
    patched_opener(monkeypatch, {PTB_ZIP_URL: ptb_zip([fake])})
    with pytest.raises(ValueError) as error:
        fetch_ptb(tmp_path / "ptb")
    message = str(error.value)
    assert "\n" not in message and f"unpacked from {PTB_ZIP_URL}) failed its checksum" in message
    assert str(tmp_path / "ptb" / TREEBANK_DIR) in message
    assert no_leftovers(tmp_path / "ptb") == []


def test_every_workflow_runs_from_its_own_commands_without_the_shared_data():
    """Each command's deps come from an earlier command of the workflow or from the repository, and the
    shared data folder is only ever a fetch command's --local (which falls back to the download)."""
    config = load_project_config(REPO)
    local_data = config["vars"]["local_data"]
    commands = {command["name"]: command for command in config["commands"]}
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    tracked = set(listed.stdout.split())
    for workflow, names in config["workflows"].items():
        produced = set()
        for name in names:
            for dep in commands[name].get("deps", []):
                in_repo = dep in tracked or any(path.startswith(dep.rstrip("/") + "/") for path in tracked)
                assert dep in produced or in_repo, f"workflow {workflow}: {name} needs {dep}, made by none before it"
            produced.update(commands[name].get("outputs", []))
    for command in commands.values():
        for line in command["script"]:
            words = line.split()
            for i, word in enumerate(words):
                if local_data in word:
                    assert line.startswith("python -m spacy_pairatt fetch-") and words[i - 1] == "--local", line


@pytest.mark.parametrize(
    "command, first",
    [
        ("fetch-ud", "en_ewt-ud-train.conllu"),
        ("fetch-semeval", next(iter(SEMEVAL_FILES))),
        ("fetch-docred", "dev_revised.json"),
    ],
)
def test_the_command_reports_a_checksum_mismatch_in_one_line(command, first, tmp_path, monkeypatch):
    """`python -m spacy_pairatt fetch-*` without --local: content that is not the release ends the command with
    one line naming the file and where it came from (exit 1, no traceback), and leaves nothing behind."""
    from spacy_pairatt.cli import main

    patched_opener(monkeypatch, lambda url: b"not the release\n")
    with pytest.raises(SystemExit) as error:
        main([command, str(tmp_path / "out")])
    message = error.value.code
    assert isinstance(message, str) and "\n" not in message
    assert message.startswith(f"python -m spacy_pairatt {command}: error: {first} (downloaded from https://")
    assert "failed its checksum" in message
    assert not (tmp_path / "out").exists() or no_leftovers(tmp_path / "out") == []
