"""parse: a pipeline over a text or CoNLL-U file, in one process, forked workers or Dask shards
(`spacy_pairatt.parse_files`)."""

import argparse
import sys

from ..parse_files.errors import MAX_COUNT


def at_least_one(text: str) -> int:
    """argparse type: a whole number >= 1."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def probability(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {value}")
    return value


def process_count(text: str) -> int:
    """argparse type: a number of processes, >= 1 or -1 (one per CPU)."""
    value = whole_number(text)
    if value < 1 and value != -1:
        raise argparse.ArgumentTypeError(f"must be at least 1, or -1 for one per CPU, got {value}")
    return value


def whole_number(text: str) -> int:
    """argparse type: a whole number that Python's counters (islice, deque) take, up to MAX_COUNT either way."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if abs(value) > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{text} is too large (at most {MAX_COUNT})")
    return value


def parse(args) -> None:
    """One process (nlp.pipe, --n-process) or, with --scheduler / --dask-workers, Dask shards."""
    from ..parse_files.errors import ParseCommandError
    from ..parse_files.parsing import parse_file

    if args.bounded_memory:
        from ..integration.memory import restart_with_jemalloc

        restart_with_jemalloc(sys.argv[1:])
    options = {
        "input_format": args.input_format,
        "output_format": args.output_format,
        "batch_size": args.batch_size,
        "progress": not args.no_progress,
        "tokenizer": args.tokenizer,
        "bounded_memory": args.bounded_memory,
    }
    try:
        if args.scheduler or args.dask_workers is not None:
            from ..parse_files.distributed import parse_shards

            if args.n_process != 1:
                raise ParseCommandError("--n-process is for one machine; with Dask, workers parse the shards")
            shards = parse_shards(
                args.model,
                args.input,
                args.output,
                shard_size=args.shard_size,
                scheduler_address=args.scheduler,
                n_workers=args.dask_workers,
                verbose=args.verbose,
                **options,
            )
            print(f"Wrote {len(shards)} shards to {args.output}", file=sys.stderr)
        else:
            parse_file(args.model, args.input, args.output, n_process=args.n_process, **options)
    except ParseCommandError as error:
        raise SystemExit(f"python -m spacy_pairatt parse: error: {error}") from error


def add_commands(commands) -> None:
    """Its commands on the `python -m spacy_pairatt` subparsers."""
    parsing = commands.add_parser("parse", help="parse text or CoNLL-U into CoNLL-U or JSON lines, streaming")
    parsing.add_argument("model", help="package name or path of a pipeline")
    parsing.add_argument("input", help="input file, or - for stdin")
    parsing.add_argument(
        "--input-format",
        default="text",
        choices=("text", "paragraphs", "conllu"),
        help="text: one document per non-empty line (default); paragraphs: one document per paragraph, "
        "paragraphs separated by blank lines; conllu: one document per sentence",
    )
    parsing.add_argument("--output", help="output file (default: stdout); with Dask, the directory for the shard files")
    parsing.add_argument(
        "--output-format",
        default="conllu",
        choices=("conllu", "json", "docbin"),
        help="conllu (default), json (one object per line per document), docbin (with Dask only)",
    )
    parsing.add_argument("--batch-size", type=at_least_one, default=64, help="documents per batch (default: 64)")
    parsing.add_argument(
        "--n-process", type=process_count, default=1, help="worker processes, -1: one per CPU (default: 1)"
    )
    parsing.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parsing.add_argument(
        "--tokenizer",
        metavar="NAME",
        help="a registered tokenizer to use instead of the pipeline's, e.g. spacy.Tokenizer.v1 (spaCy's own)",
    )
    parsing.add_argument(
        "--bounded-memory",
        action="store_true",
        help="keep memory flat in a long parse: hand free heap back as it grows, under jemalloc where the system "
        "has it (a restart with it preloaded); costs some speed (docs/performance.md#memory)",
    )
    dask = parsing.add_mutually_exclusive_group()
    dask.add_argument("--scheduler", metavar="ADDRESS", help="parse shards on the Dask cluster at this address")
    dask.add_argument(
        "--dask-workers", type=at_least_one, metavar="N", help="parse shards on a local Dask cluster of N processes"
    )
    parsing.add_argument(
        "--shard-size", type=at_least_one, default=1000, help="documents per Dask task and output file (default: 1000)"
    )
    parsing.add_argument("--verbose", action="store_true", help="with Dask: show its logs, the workers' too")
    parsing.set_defaults(func=parse, records_provenance=False)
