"""`python -m spacy_pairatt`: the project's commands, one subcommand each."""

import argparse
import sys
from pathlib import Path


def fetch_ud(args) -> None:
    from .corpora.ud import fetch_ud_ewt

    fetch_ud_ewt(Path(args.dest), Path(args.local) if args.local else None)


def fetch_relation_data(args) -> None:
    from .corpora import docred, semeval

    fetch = {"fetch-semeval": semeval.fetch_semeval, "fetch-docred": docred.fetch_docred}[args.command]
    fetch(Path(args.dest), Path(args.local) if args.local else None)


def convert_relation_data(args) -> None:
    from .corpora import docred, semeval

    if args.command == "semeval-convert":
        semeval.convert_semeval(Path(args.src_dir), Path(args.out_dir), args.markers)
    else:
        docred.convert_docred(Path(args.src_dir), Path(args.out_dir))


def evaluate(args) -> None:
    from .evaluation import evaluate_pipeline, write_json

    write_json(evaluate_pipeline(args.model, args.data, args.sentences), args.output)


def evaluate_relations(args) -> None:
    from .evaluation import write_json
    from .relation_evaluation import evaluate_docred, evaluate_semeval

    if args.command == "semeval-evaluate":
        result = evaluate_semeval(args.model, args.data)
    else:
        result = evaluate_docred(args.model, args.tune, args.test, args.train)
    write_json(result, args.output)


def relations_table(args) -> None:
    """Tabulate relation evaluation JSON files given as NAME:PATH into markdown (and one JSON)."""
    import json

    from .evaluation import replace_marked_block, write_json
    from .relation_evaluation import relations_table as tabulate

    rows = []
    for spec in args.results:
        name, path = spec.split(":", 1)
        rows.append((name, json.loads(Path(path).read_text(encoding="utf8"))))
    text = tabulate(rows)
    if args.output:
        Path(args.output).write_text((args.title + "\n\n" if args.title else "") + text, encoding="utf8")
    if args.json:
        write_json({"results": [{"name": name, **result} for name, result in rows]}, args.json)
    if args.readme:
        readme = Path(args.readme)
        readme.write_text(replace_marked_block(readme.read_text(encoding="utf8"), "relations", text), "utf8")
    print(text)


def table(args) -> None:
    """Tabulate evaluation JSON files given as NAME:SPLIT:PATH into markdown."""
    import json

    from .evaluation import replace_marked_block, results_table

    rows = []
    for spec in args.results:
        name, split, path = spec.split(":", 2)
        rows.append({"name": name, "split": split, "result": json.loads(Path(path).read_text(encoding="utf8"))})
    text = results_table(rows)
    if args.output:
        Path(args.output).write_text((args.title + "\n\n" if args.title else "") + text, encoding="utf8")
    if args.readme:
        readme = Path(args.readme)
        readme.write_text(replace_marked_block(readme.read_text(encoding="utf8"), args.readme_marker, text), "utf8")
    print(text)


def assemble(args) -> None:
    from .packaging import assemble_pipeline

    assemble_pipeline(args.model, args.output, args.accuracy, args.senter, args.version)


def demo(args) -> None:
    from .packaging import parse_examples

    parse_examples(args.model, args.output, args.text or None)


def parse(args) -> None:
    """One process (nlp.pipe, --n-process) or, with --scheduler / --dask-workers, Dask shards."""
    from .parsing import ParseCommandError, parse_file

    options = {
        "input_format": args.input_format,
        "output_format": args.output_format,
        "batch_size": args.batch_size,
        "progress": not args.no_progress,
    }
    try:
        if args.scheduler or args.dask_workers is not None:
            from .distributed import parse_shards

            if args.n_process != 1:
                raise ParseCommandError("--n-process is for one machine; with Dask, workers parse the shards")
            shards = parse_shards(
                args.model,
                args.input,
                args.output,
                shard_size=args.shard_size,
                scheduler_address=args.scheduler,
                n_workers=args.dask_workers,
                **options,
            )
            print(f"Wrote {len(shards)} shards to {args.output}", file=sys.stderr)
        else:
            parse_file(args.model, args.input, args.output, n_process=args.n_process, **options)
    except ParseCommandError as error:
        raise SystemExit(f"python -m spacy_pairatt parse: error: {error}") from error


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spacy_pairatt", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch-ud", help="UD English-EWT 2.16 into a folder (local copy or download)")
    fetch.add_argument("dest")
    fetch.add_argument("--local", help="folder with a local copy of the .conllu files, used when present")
    fetch.set_defaults(func=fetch_ud)
    for corpus, what, local, splits in (
        ("semeval", "SemEval-2010 Task 8 train and test files", "SemEval2010_task8_all_data/", "train/dev/test"),
        ("docred", "Re-DocRED dev_revised.json and test_revised.json", "the two files", "train/tune/test"),
    ):
        fetch_corpus = commands.add_parser(f"fetch-{corpus}", help=f"{what} into a folder (local copy or download)")
        fetch_corpus.add_argument("dest")
        fetch_corpus.add_argument("--local", help=f"folder holding {local} (a local copy), used when present")
        fetch_corpus.set_defaults(func=fetch_relation_data)
        convert = commands.add_parser(f"{corpus}-convert", help=f"{what} to {splits} .spacy files")
        convert.add_argument("src_dir", metavar="SRC_DIR", help=f"folder holding {local}")
        convert.add_argument("out_dir", metavar="OUT_DIR")
        convert.set_defaults(func=convert_relation_data)
        if corpus == "semeval":
            convert.add_argument("--markers", action="store_true", help='"$ e1 $" and "# e2 #" in the text')
    semeval_evaluation = commands.add_parser(
        "semeval-evaluate", help="official SemEval-2010 Task 8 scores of a relation pipeline on a converted split"
    )
    semeval_evaluation.add_argument("model")
    semeval_evaluation.add_argument("data", help=".spacy file from semeval-convert")
    semeval_evaluation.add_argument("--output", help="JSON file for the results")
    semeval_evaluation.set_defaults(func=evaluate_relations)
    docred_evaluation = commands.add_parser(
        "docred-evaluate", help="Re-DocRED F1, Ign F1 and AUC of a relation pipeline, θ tuned on held-out documents"
    )
    docred_evaluation.add_argument("model")
    docred_evaluation.add_argument("--tune", required=True, help=".spacy documents θ is tuned on")
    docred_evaluation.add_argument("--test", required=True, help=".spacy documents the scores are read on")
    docred_evaluation.add_argument("--train", required=True, help=".spacy training documents (for Ign F1)")
    docred_evaluation.add_argument("--output", help="JSON file for the results")
    docred_evaluation.set_defaults(func=evaluate_relations)
    relation_table = commands.add_parser("relations-table", help="markdown tables from relation evaluation JSON files")
    relation_table.add_argument("results", nargs="+", help="NAME:PATH of a semeval-evaluate or docred-evaluate file")
    relation_table.add_argument("--output", help="markdown file to write")
    relation_table.add_argument("--json", help="JSON file gathering every result by name")
    relation_table.add_argument("--title", default="", help="a line written above the tables")
    relation_table.add_argument("--readme", help="also write the tables between <!-- relations:start/end --> here")
    relation_table.set_defaults(func=relations_table)
    evaluation = commands.add_parser("evaluate", help="score a parsing pipeline on a .spacy corpus")
    evaluation.add_argument("model")
    evaluation.add_argument("data")
    evaluation.add_argument("--output", help="JSON file for the results")
    evaluation.add_argument(
        "--sentences",
        default="pipeline",
        help="where sentence boundaries come from: pipeline (default), gold, sentencizer, or the path "
        "of a pipeline whose senter is put in front",
    )
    evaluation.set_defaults(func=evaluate)
    tabulate = commands.add_parser("table", help="markdown table from evaluation JSON files")
    tabulate.add_argument("results", nargs="+", help="NAME:SPLIT:PATH of an evaluate --output file")
    tabulate.add_argument("--output", help="markdown file to write")
    tabulate.add_argument("--title", default="", help="a line written above the table")
    tabulate.add_argument("--readme", help="also write the table into this file between marker comments")
    tabulate.add_argument(
        "--readme-marker", default="results", help="NAME in <!-- NAME:start --> ... <!-- NAME:end -->"
    )
    tabulate.set_defaults(func=table)
    assembly = commands.add_parser(
        "assemble", help="trained pipeline + sentencizer + metadata, ready for spacy package"
    )
    assembly.add_argument("model")
    assembly.add_argument("output")
    assembly.add_argument("--accuracy", help="evaluate --output JSON whose scores go into meta.json")
    assembly.add_argument("--senter", help="pipeline whose senter goes in front (default: the rule-based sentencizer)")
    assembly.add_argument("--version", help="package version for meta.json and the model card README.md")
    assembly.set_defaults(func=assemble)
    demonstration = commands.add_parser("demo", help="parse example sentences, print them, save a displaCy page")
    demonstration.add_argument("model")
    demonstration.add_argument("--output", help="HTML file for the displaCy rendering")
    demonstration.add_argument(
        "--text", action="append", help="a text to parse (repeatable); default: built-in examples"
    )
    demonstration.set_defaults(func=demo)
    parsing = commands.add_parser("parse", help="parse text or CoNLL-U into CoNLL-U or JSON lines, streaming")
    parsing.add_argument("model", help="package name or path of a pipeline")
    parsing.add_argument("input", help="input file, or - for stdin")
    parsing.add_argument(
        "--input-format",
        default="text",
        choices=("text", "conllu"),
        help="text: one document per non-empty line (default); conllu: one document per sentence",
    )
    parsing.add_argument(
        "--output", help="output file (default: stdout); with Dask, the directory for the shard files"
    )
    parsing.add_argument(
        "--output-format",
        default="conllu",
        choices=("conllu", "json", "docbin"),
        help="conllu (default), json (one object per line per document), docbin (with Dask only)",
    )
    parsing.add_argument("--batch-size", type=int, default=64, help="documents per nlp.pipe batch (default: 64)")
    parsing.add_argument("--n-process", type=int, default=1, help="nlp.pipe worker processes (default: 1)")
    parsing.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    dask = parsing.add_mutually_exclusive_group()
    dask.add_argument("--scheduler", metavar="ADDRESS", help="parse shards on the Dask cluster at this address")
    dask.add_argument(
        "--dask-workers", type=int, metavar="N", help="parse shards on a local Dask cluster of N processes"
    )
    parsing.add_argument(
        "--shard-size", type=int, default=1000, help="documents per Dask task and output file (default: 1000)"
    )
    parsing.set_defaults(func=parse)
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    args.func(args)
