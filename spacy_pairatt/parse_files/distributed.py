"""Parse a large input on a Dask cluster: shards of documents, one output file per shard.

Why Dask rather than Ray: it is a pure pip wheel, a LocalCluster runs from the calling process
(tests included) with no separate daemon to install or start, and parsing independent shards needs
nothing more than `client.submit` per shard. Workers read their shard straight from the input file
at a byte offset, so no shard inputs are written and the input is never held in memory.

Interrupts and errors: a task that already runs cannot be stopped from the client, so tasks write
into a folder private to the run (`staged_run`), and the shards are moved into the output directory
only once every task has succeeded. A failed or interrupted run renames that folder away before
removing it: a task still running on some worker then finds no folder to write into, and nothing
it does can reach the output directory or a later run.
"""

import logging
import os
import shutil
import signal
import threading
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from dask.distributed import Client, Future, LocalCluster, as_completed
from spacy.language import Language
from spacy.tokens import DocBin
from tqdm import tqdm

from ..runs.scratch import remove_stale_scratch, renamed_scratch, scratch_path
from ..runs.signals import stop_signals_held, stop_signals_ignored
from .errors import ParseCommandError, check_choice, check_counts, flat_message
from .files import OutputTarget, open_input
from .parsing import load_pipeline, parse_docs
from .reading import INPUT_FORMATS, read_documents
from .writing import progress_bar, write_docs

SHARD_SUFFIXES = {"conllu": ".conllu", "json": ".jsonl", "docbin": ".spacy"}
STAGING_NAME = "shards-run"  # its scratch folders are hidden, so not taken for shards (`shard-*`)
# Read by the `distributed` package when a worker process starts, before any of our code runs there.
WORKER_LOG_LEVEL_VARIABLE = "DASK_LOGGING__DISTRIBUTED"
# One loaded pipeline per (model, tokenizer) for each worker process: loading takes seconds, a shard may not.
PIPELINES: Dict[Tuple[str, Optional[str]], Language] = {}


@dataclass(frozen=True)
class Shard:
    """Where a shard starts in the input (byte offset, line number) and how many documents it holds."""

    index: int
    offset: int
    first_line: int
    n_docs: int


def plan_shards(input_path: str, input_format: str, shard_size: int) -> Iterator[Shard]:
    """Scan the input once, lazily, cutting it every `shard_size` documents; malformed input fails here."""
    with open_input(input_path) as stream:
        sources = read_documents(stream, input_format)
        for index, first in enumerate(sources):
            n_docs = 1 + sum(1 for _ in islice(sources, shard_size - 1))
            yield Shard(index, first.offset, first.line, n_docs)


def parse_shard(
    model: str,
    input_path: str,
    output_dir: str,
    shard: Shard,
    input_format: str,
    output_format: str,
    batch_size: int,
    tokenizer: Optional[str] = None,
    bounded_memory: bool = False,
) -> str:
    """Run on a worker: parse one shard with the worker's cached pipeline and write its file.

    The file is written under a temporary name and renamed when complete: a failed task leaves none.
    """
    if (model, tokenizer, bounded_memory) not in PIPELINES:
        PIPELINES[model, tokenizer, bounded_memory] = load_pipeline(model, tokenizer, bounded_memory)
        # tqdm's default lock (the writer's progress bar, off here) is a semaphore registered with the
        # resource tracker, which warns on stderr when a worker killed mid-task (a cancelled run) leaves it
        tqdm.set_lock(threading.RLock())
    nlp = PIPELINES[model, tokenizer, bounded_memory]
    path = Path(output_dir) / f"shard-{shard.index:05d}{SHARD_SUFFIXES[output_format]}"
    with open_input(input_path) as stream:
        stream.seek(shard.offset)
        sources = islice(read_documents(stream, input_format, shard.first_line, shard.offset), shard.n_docs)
        docs = parse_docs(nlp, sources, batch_size)
        if output_format == "docbin":
            partial = path.with_name(f".{path.name}.partial")
            try:
                DocBin(docs=docs, store_user_data=True).to_disk(partial)
                partial.replace(path)
            finally:
                partial.unlink(missing_ok=True)
        else:
            with OutputTarget(str(path)).open() as output:
                write_docs(docs, output, output_format)
    return str(path)


@contextmanager
def dask_client(scheduler_address: Optional[str], n_workers: int, verbose: bool = False) -> Iterator[Client]:
    """A client of the cluster at scheduler_address, or of a LocalCluster started and closed here.

    The LocalCluster's workers are processes with one thread each: the pipeline is not shared
    between threads, and torch gets one core per worker. They ignore SIGINT and SIGHUP, so that a Ctrl-C or a
    hangup (sent to the whole process group) stops only this process, which cancels the run and closes the
    cluster. Dask's own logs (from this process and from the workers) are shown only when verbose.
    """
    with dask_logs(verbose):
        if scheduler_address:
            try:
                client = Client(scheduler_address)
            except OSError as error:
                raise ParseCommandError(f"cannot reach the Dask scheduler at {scheduler_address}: {error}") from error
            with client:
                yield client
            return
        quiet = logging.WARNING if verbose else logging.CRITICAL
        with ExitStack() as stack:
            # a Ctrl-C or hangup while the workers start is lost: the price of quiet workers
            with stop_signals_ignored((signal.SIGINT, signal.SIGHUP)):
                cluster = stack.enter_context(
                    LocalCluster(
                        n_workers=n_workers,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        silence_logs=quiet,
                    )
                )
            yield stack.enter_context(Client(cluster))


@contextmanager
def dask_logs(verbose: bool) -> Iterator[None]:
    """Dask's logs at their own levels when verbose; otherwise only critical ones, here and in the
    worker processes started meanwhile (the messages that matter reach the user as the run's error)."""
    if verbose:
        yield
        return
    logger = logging.getLogger("distributed")
    level, variable = logger.level, os.environ.get(WORKER_LOG_LEVEL_VARIABLE)
    logger.setLevel(logging.CRITICAL)
    os.environ[WORKER_LOG_LEVEL_VARIABLE] = "critical"
    try:
        yield
    finally:
        logger.setLevel(level)
        if variable is None:
            os.environ.pop(WORKER_LOG_LEVEL_VARIABLE, None)
        else:
            os.environ[WORKER_LOG_LEVEL_VARIABLE] = variable


@contextmanager
def staged_run(output: Path) -> Iterator[Path]:
    """A folder inside `output`, private to this run, where its tasks write their shards (scratch:
    a killed run's is removed by the next run).

    Whatever happens, it is gone at the end: renamed first, so that a task still running on a worker
    (Dask cannot stop one) holds a path that no longer exists and writes nothing; then removed.
    """
    remove_stale_scratch(output / STAGING_NAME)
    staging = scratch_path(output / STAGING_NAME, "staging")
    staging.mkdir()
    try:
        yield staging
    finally:
        discarded = renamed_scratch(staging, "discarded")
        with stop_signals_held():
            try:
                staging.rename(discarded)
            except FileNotFoundError:
                pass
            shutil.rmtree(discarded, ignore_errors=True)


def shard_result(future: Future) -> Path:
    """A task's shard file; its error as a ParseCommandError (a pipeline's already is one)."""
    try:
        return Path(future.result())
    except (ParseCommandError, KeyboardInterrupt):
        raise
    except Exception as error:
        raise ParseCommandError(f"a Dask task failed: {type(error).__name__}: {flat_message(error)}") from error


def publish(staged: Sequence[Path], output: Path) -> List[Path]:
    """Move a finished run's shards into `output`, in order; all of them or, if interrupted, none."""
    published: List[Path] = []
    try:
        for path in staged:
            target = output / path.name
            path.replace(target)
            published.append(target)
    except BaseException:
        for path in published:
            path.unlink(missing_ok=True)
        raise
    return published


def parse_shards(
    model: str,
    input_path: str,
    output_dir: str,
    *,
    input_format: str = "text",
    output_format: str = "conllu",
    shard_size: int = 1000,
    scheduler_address: Optional[str] = None,
    n_workers: Optional[int] = 2,
    batch_size: int = 64,
    progress: bool = False,
    tokenizer: Optional[str] = None,
    verbose: bool = False,
    bounded_memory: bool = False,
) -> List[Path]:
    """Parse `input_path` on Dask workers, `shard_size` documents per task; returns the shard files in input order.

    Each shard becomes `output_dir/shard-00000.conllu` (or `.jsonl`, or `.spacy`: a DocBin with
    user data, which keeps each Doc's id and CoNLL-U comments); their concatenation is what
    `parse_file` writes for the whole input. Without `scheduler_address` a LocalCluster of
    `n_workers` processes is started and closed (with an address, n_workers is not used). On an
    existing cluster, the model (a package name or path), the input and output_dir must be
    reachable from every worker at the same paths. output_dir must hold no shard files yet.
    Shards are submitted while the input is scanned, so workers start before the scan ends.

    An error or an interrupt (KeyboardInterrupt; under the command, SIGTERM and SIGHUP raise one too:
    `spacy_pairatt.runs.signals`) cancels the tasks
    and leaves no shard files, whatever the tasks still running do later (see `staged_run`), so the
    same command can be run again at once. verbose: show Dask's logs (from the workers too).
    bounded_memory: each worker's pipeline bounds its heap (`load_pipeline`).
    """
    check_choice("input format", input_format, INPUT_FORMATS)
    check_choice("output format", output_format, tuple(SHARD_SUFFIXES))
    if input_path == "-":
        raise ParseCommandError("Dask workers read the input at byte offsets: give a file, not stdin")
    if not Path(input_path).is_file():
        raise ParseCommandError(f"cannot read the input {input_path}: not a file")
    if not scheduler_address and n_workers < 1:
        raise ParseCommandError(f"a local Dask cluster needs at least 1 worker, got {n_workers}")
    if shard_size < 1:
        raise ParseCommandError(f"the shard size must be at least 1, got {shard_size}")
    check_counts(batch_size)
    if not output_dir:
        raise ParseCommandError("parsing with Dask writes one file per shard: give an output directory")
    output = Path(output_dir).resolve()
    if output.exists() and not output.is_dir():
        raise ParseCommandError(f"the output {output_dir} must be a directory for the shards, not a file")
    if any(output.glob("shard-*")):
        # a shorter run's shards would be concatenated with a longer run's leftovers
        raise ParseCommandError(f"{output_dir} already holds shard files: remove them or choose another directory")
    output.mkdir(parents=True, exist_ok=True)
    # Workers may run in another directory: send them absolute paths (a package name stays a name).
    model = str(Path(model).resolve()) if Path(model).exists() else model
    input_path = str(Path(input_path).resolve())
    with staged_run(output) as staging:
        with dask_client(scheduler_address, n_workers, verbose) as client:
            futures = []
            try:
                arguments = (model, input_path, str(staging))
                for shard in plan_shards(input_path, input_format, shard_size):
                    task = (*arguments, shard, input_format, output_format, batch_size, tokenizer, bounded_memory)
                    futures.append(client.submit(parse_shard, *task, pure=False))
                done = as_completed(futures)
                for future in progress_bar(done, progress, total=len(futures), unit="shard") if progress else done:
                    shard_result(future)  # a worker's error stops the run as soon as it arrives
                staged = [shard_result(future) for future in futures]
            except BaseException as error:
                client.cancel(futures)
                if isinstance(error, ParseCommandError):
                    raise ParseCommandError(f"{error} (no shards written to {output_dir})") from error
                raise
        return publish(staged, output)
