"""`python -m spacy_pairatt parse`: read documents lazily, parse them, write each one as it comes out.

Nothing here holds the whole input: lines are read as the parser asks for documents, and every
parsed Doc is written before the next is read. The readers (reading.py) and writers (writing.py)
are shared with the Dask scale-out (distributed.py), so a shard's output is the single-process
output for its documents.

Faults: an input error (a line that is not UTF-8, malformed CoNLL-U) ends the input there; the
documents before it are still parsed (so the message can say how many) and the run then fails.
Any other error (the pipeline, the output, a worker that dies, Ctrl-C) stops the worker processes
at once. The output goes to a temporary file beside the target, renamed over it only on success.
"""

import os
from collections import deque
from typing import BinaryIO, Deque, Iterable, Iterator, List, Optional, TextIO

import spacy
from spacy.language import Language
from spacy.tokens import Doc

from .errors import ParseCommandError, check_choice, check_counts, flat_message
from .files import OutputTarget, check_output_is_not_input, open_input
from .reading import INPUT_FORMATS, SourceDoc, batch_where, read_documents
from .workers import parse_in_processes
from .writing import TEXT_WRITERS, write_docs


def load_pipeline(model: str, tokenizer: Optional[str] = None, bounded_memory: bool = False) -> Language:
    """spacy.load, plus a doc_cleaner at the end; a pipeline that assigns neither heads nor sentence
    starts is refused (a segmenter alone writes sentences, with no syntax).

    The cleaner drops `Doc._.trf_data` (megabytes of attention per Doc) before Docs are sent back
    from worker processes or saved in a DocBin; heads and labels are already written.
    tokenizer: a registered tokenizer's name (`spacy.Tokenizer.v1`, spaCy's own for the pipeline's
    language) to use instead of the pipeline's, whose saved rules are then not loaded: to measure
    what a tokenizer does to the scores from raw text. bounded_memory: the `pairatt_bounded_memory`
    pipe last (`integration/memory.py`), which hands free heap back to the system in a long parse.
    """
    from catalogue import RegistryError

    swap = (
        {}
        if tokenizer is None
        else {"exclude": ["tokenizer"], "config": {"nlp": {"tokenizer": {"@tokenizers": tokenizer}}}}
    )
    try:
        nlp = spacy.load(model, **swap)
    except RegistryError as error:
        raise ParseCommandError(f"no registered tokenizer {tokenizer!r}: {flat_message(error)}") from error
    except (OSError, ValueError) as error:
        raise ParseCommandError(f"cannot load the pipeline {model!r}: {flat_message(error)}") from error
    assigned = {attribute for name in nlp.pipe_names for attribute in nlp.get_pipe_meta(name).assigns}
    if not assigned & {"token.head", "token.is_sent_start"}:
        raise ParseCommandError(
            f"the pipeline {model!r} has no component that assigns heads or sentence starts (its components: "
            f"{', '.join(nlp.pipe_names) or 'none'}): parse needs a parser or a segmenter"
        )
    if "doc_cleaner" not in nlp.pipe_names:
        nlp.add_pipe("doc_cleaner")
    if bounded_memory and "pairatt_bounded_memory" not in nlp.pipe_names:
        nlp.add_pipe("pairatt_bounded_memory")
    return nlp


class StopAtError:
    """The documents of an input until one fails to be read: the error is kept, not raised.

    Given to the parser, an input error thus ends the input in order: the documents before it are
    parsed and the workers stop as at the end of any input. The caller raises `error` afterwards.
    """

    def __init__(self, sources: Iterable[SourceDoc]):
        self.sources = iter(sources)
        self.error: Optional[ParseCommandError] = None

    def __iter__(self) -> "StopAtError":
        return self

    def __next__(self) -> SourceDoc:
        if self.error is not None:
            raise StopIteration
        try:
            return next(self.sources)
        except ParseCommandError as error:
            self.error = error
            raise StopIteration from None


def parse_docs(nlp: Language, sources: Iterable[SourceDoc], batch_size: int = 64, n_process: int = 1) -> Iterator[Doc]:
    """The parsed Docs in input order, each source made a Doc when the parser asks for it.

    n_process > 1 (or -1: one per CPU): forked worker processes (parse_in_processes), never more
    than the CPUs this process may use (more would only compete for them). An error of the pipeline
    is a ParseCommandError naming the documents it was parsing.
    """
    check_counts(batch_size, n_process)
    n_process = usable_cpus() if n_process == -1 else min(n_process, usable_cpus())
    if n_process > 1:
        yield from parse_in_processes(nlp, sources, batch_size, n_process)
        return
    recent: Deque[SourceDoc] = deque(maxlen=batch_size)
    n_read = n_parsed = 0

    def docs() -> Iterator[Doc]:
        nonlocal n_read
        for source in sources:
            recent.append(source)
            n_read += 1
            yield source.to_doc(nlp)

    try:
        for doc in nlp.pipe(docs(), batch_size=batch_size):
            n_parsed += 1
            yield doc
    except ParseCommandError:
        raise
    except Exception as error:
        batch = list(recent)[-(n_read - n_parsed) :] if n_read > n_parsed else list(recent)[-1:]
        raise pipeline_error(error, batch) from error


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the platform has one), at least 1."""
    affinity = getattr(os, "sched_getaffinity", None)
    return max(1, len(affinity(0)) if affinity else os.cpu_count() or 1)


def pipeline_error(error: BaseException, batch: List[SourceDoc]) -> ParseCommandError:
    return ParseCommandError(
        f"the pipeline failed on {batch_where(batch)}: {type(error).__name__}: {flat_message(error)}"
    )


def parse_stream(
    nlp: Language,
    stream: BinaryIO,
    output: TextIO,
    *,
    input_format: str = "text",
    output_format: str = "conllu",
    batch_size: int = 64,
    n_process: int = 1,
    progress: bool = False,
) -> int:
    """Parse the documents of a binary stream with a loaded pipeline and write them; returns how many.

    An input error is raised once the documents before it are parsed and written; any error's
    n_docs is the number of documents written before it.
    """
    check_choice("output format", output_format, tuple(TEXT_WRITERS))
    check_counts(batch_size, n_process)
    sources = StopAtError(read_documents(stream, input_format))
    n_docs = write_docs(parse_docs(nlp, sources, batch_size, n_process), output, output_format, progress)
    if sources.error is not None:
        sources.error.n_docs = n_docs
        raise sources.error
    return n_docs


def parse_file(
    model: str,
    input_path: str,
    output_path: Optional[str] = None,
    *,
    input_format: str = "text",
    output_format: str = "conllu",
    batch_size: int = 64,
    n_process: int = 1,
    progress: bool = True,
    tokenizer: Optional[str] = None,
    bounded_memory: bool = False,
) -> int:
    """Parse a file (or stdin, `-`) with a pipeline and write CoNLL-U or JSON lines; returns the number of Docs.

    Formats, counts and the input are checked before the pipeline is loaded, so mistakes fail fast.
    The output file is written only when the whole input is parsed (see OutputTarget.open); a failed
    run's message says how many documents were parsed before the error.
    """
    check_choice("input format", input_format, INPUT_FORMATS)
    if output_format == "docbin":
        raise ParseCommandError("docbin output is one DocBin per Dask shard: add --dask-workers N or --scheduler")
    check_choice("output format", output_format, tuple(TEXT_WRITERS))
    check_counts(batch_size, n_process)
    check_output_is_not_input(input_path, output_path)
    with open_input(input_path) as stream:
        nlp = load_pipeline(model, tokenizer, bounded_memory)
        target = OutputTarget(output_path)
        try:
            with target.open() as output:
                options = {"input_format": input_format, "output_format": output_format, "progress": progress}
                return parse_stream(nlp, stream, output, batch_size=batch_size, n_process=n_process, **options)
        except ParseCommandError as error:
            if error.n_docs is None:
                raise
            raise ParseCommandError(f"{error} ({target.failure_note(error.n_docs)})") from error
