"""The parse command's input and output files: stdin or a file in; stdout, a special file written in
place, or a temporary file renamed over the target only when the whole input is parsed."""

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, NoReturn, Optional, TextIO

from ..runs.scratch import current_umask, remove_stale_scratch, scratch_path
from ..runs.signals import stop_signals_held
from .errors import ParseCommandError


class Output:
    """A text stream whose write and flush errors are ParseCommandErrors naming the output."""

    def __init__(self, stream: TextIO, name: str):
        self.stream, self.name = stream, name

    def write(self, text: str) -> None:
        try:
            self.stream.write(text)
        except OSError as error:
            self.fail(error)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as error:
            self.fail(error)

    def fail(self, error: OSError) -> NoReturn:
        """A ParseCommandError naming the output; a closed stdout pipe (`parse ... | head`) stays a
        BrokenPipeError, which is no failure: the reader has what it wanted (the CLI exits 0)."""
        if isinstance(error, BrokenPipeError) and self.stream is sys.stdout:
            # the interpreter's last flush must not fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise error
        raise ParseCommandError(f"cannot write the output {self.name}: {error.strerror or error}") from error


@dataclass
class OutputTarget:
    """Where parse_file writes, and what a failed run leaves there (for the error message)."""

    path: Optional[str]
    existed: bool = False  # a file was there before the run
    in_place: bool = False  # a special file, written directly

    @property
    def is_stdout(self) -> bool:
        return self.path in (None, "-")

    def failure_note(self, n_docs: int) -> str:
        parsed = f"{n_docs} document{'' if n_docs == 1 else 's'} parsed before the error"
        if self.is_stdout:
            return f"{parsed}, written to stdout"
        if self.in_place:
            return f"{parsed}; {self.path}, not a regular file, was written in place"
        return f"{parsed}; {self.path} {'is unchanged' if self.existed else 'was not written'}"

    @contextmanager
    def open(self) -> Iterator[Output]:
        """stdout; a special file (/dev/null, a FIFO) written in place; else a scratch file beside the
        target (`spacy_pairatt.runs.scratch`), renamed over it on success and removed on failure, and a
        killed run's scratch removed first."""
        self.in_place = self.existed = False
        if self.is_stdout:
            output = Output(sys.stdout, "stdout")
            yield output
            output.flush()
            return
        target = Path(os.path.realpath(self.path))
        if target.is_dir():
            raise ParseCommandError(f"cannot write the output {self.path}: it is a directory")
        self.existed = target.exists()
        if self.existed and not target.is_file():
            self.in_place = True
            with self.open_stream(lambda: open(target, "w", encoding="utf8", newline="\n")) as output:
                yield output
            return
        if not target.parent.is_dir():
            raise ParseCommandError(f"cannot write the output {self.path}: there is no folder {target.parent}")
        mode = target.stat().st_mode & 0o7777 if self.existed else 0o666 & ~current_umask()
        remove_stale_scratch(target)
        temporary = scratch_path(target, "partial")
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as error:
            raise ParseCommandError(f"cannot write the output {self.path}: {error.strerror or error}") from error
        try:
            with self.open_stream(lambda: os.fdopen(handle, "w", encoding="utf8", newline="\n"), sync=True) as output:
                yield output
            try:
                os.chmod(temporary, mode)
                os.replace(temporary, target)
            except OSError as error:
                raise ParseCommandError(f"cannot write the output {self.path}: {error.strerror or error}") from error
        except BaseException:
            with stop_signals_held():
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
            raise

    @contextmanager
    def open_stream(self, opener: Callable[[], TextIO], sync: bool = False) -> Iterator[Output]:
        """An opened stream as Output; flushed (and with sync, on disk) and closed at the end."""
        try:
            stream = opener()
        except OSError as error:
            raise ParseCommandError(f"cannot write the output {self.path}: {error.strerror or error}") from error
        output = Output(stream, self.path)
        try:
            yield output
            output.flush()
            if sync:
                try:
                    os.fsync(stream.fileno())
                except OSError as error:
                    output.fail(error)
        except BaseException:
            try:
                stream.close()
            except OSError:
                pass
            raise
        try:
            stream.close()
        except OSError as error:
            output.fail(error)


def check_output_is_not_input(input_path: str, output_path: Optional[str]) -> None:
    """Refuse an output that is the input under any spelling or link, or the file stdin reads (`parse M -
    --output F < F`): writing it would replace the input."""
    if output_path in (None, "-") or not os.path.exists(output_path):
        return
    try:
        source = os.fstat(sys.stdin.fileno()) if input_path == "-" else os.stat(input_path)
        same = os.path.samestat(source, os.stat(output_path))
    except (OSError, ValueError, AttributeError):  # the input is missing (open_input says so), or there is no stdin
        return
    if same:
        named = "(stdin)" if input_path == "-" else input_path
        raise ParseCommandError(f"the output {output_path} is the input {named}: choose another output file")


@contextmanager
def open_input(path: str) -> Iterator[BinaryIO]:
    """The input file as bytes, or stdin for `-`."""
    if path == "-":
        yield sys.stdin.buffer
        return
    if os.path.isdir(path):
        raise ParseCommandError(f"cannot read the input {path}: it is a directory")
    try:
        stream = open(path, "rb")
    except OSError as error:
        raise ParseCommandError(f"cannot read the input {path}: {error.strerror or error}") from error
    with stream:
        yield stream
