"""Parse a large input on a Dask cluster: shards of documents, one output file per shard.

Why Dask rather than Ray: it is a pure pip wheel, a LocalCluster runs from the calling process
(tests included) with no separate daemon to install or start, and parsing independent shards needs
nothing more than `client.submit` per shard. Workers read their shard straight from the input file
at a byte offset, so no shard inputs are written and the input is never held in memory.
"""

from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from dask.distributed import Client, LocalCluster, as_completed
from spacy.language import Language
from spacy.tokens import DocBin

from .errors import ParseCommandError, check_choice, check_counts
from .files import OutputTarget, open_input
from .parsing import load_pipeline, parse_docs
from .reading import INPUT_FORMATS, read_documents
from .writing import progress_bar, write_docs

SHARD_SUFFIXES = {"conllu": ".conllu", "json": ".jsonl", "docbin": ".spacy"}
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
) -> str:
    """Run on a worker: parse one shard with the worker's cached pipeline and write its file.

    The file is written under a temporary name and renamed when complete: a failed task leaves none.
    """
    if (model, tokenizer) not in PIPELINES:
        PIPELINES[model, tokenizer] = load_pipeline(model, tokenizer)
    nlp = PIPELINES[model, tokenizer]
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
def dask_client(scheduler_address: Optional[str], n_workers: int) -> Iterator[Client]:
    """A client of the cluster at scheduler_address, or of a LocalCluster started and closed here.

    The LocalCluster's workers are processes with one thread each: the pipeline is not shared
    between threads, and torch gets one core per worker.
    """
    if scheduler_address:
        try:
            client = Client(scheduler_address)
        except OSError as error:
            raise ParseCommandError(f"cannot reach the Dask scheduler at {scheduler_address}: {error}") from error
        with client:
            yield client
        return
    with (
        LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        yield client


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
) -> List[Path]:
    """Parse `input_path` on Dask workers, `shard_size` documents per task; returns the shard files in input order.

    Each shard becomes `output_dir/shard-00000.conllu` (or `.jsonl`, or `.spacy`: a DocBin with
    user data, which keeps each Doc's id and CoNLL-U comments); their concatenation is what
    `parse_file` writes for the whole input. Without `scheduler_address` a LocalCluster of
    `n_workers` processes is started and closed (with an address, n_workers is not used). On an
    existing cluster, the model (a package name or path), the input and output_dir must be
    reachable from every worker at the same paths. output_dir must hold no shard files yet.
    Shards are submitted while the input is scanned, so workers start before the scan ends.
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
    with dask_client(scheduler_address, n_workers) as client:
        futures = []
        try:
            arguments = (model, input_path, str(output))
            for shard in plan_shards(input_path, input_format, shard_size):
                task = (*arguments, shard, input_format, output_format, batch_size, tokenizer)
                futures.append(client.submit(parse_shard, *task, pure=False))
            for future in progress_bar(as_completed(futures), progress, total=len(futures), unit="shard"):
                future.result()  # a worker's error stops the run as soon as it arrives
        except BaseException:
            # a failed run leaves no shards: a shorter rerun must not be concatenated with them
            client.cancel(futures)
            for path in output.glob("shard-*"):
                path.unlink(missing_ok=True)
            raise
        return [Path(future.result()) for future in futures]
