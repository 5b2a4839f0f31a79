"""`python -m spacy_pairatt`: the project's commands, one subcommand each."""

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .attention_curve import add_commands as add_curve_commands


def fetch_ud(args) -> None:
    from ..corpora.ud import fetch_ud_ewt

    with fetch_errors(args):
        fetch_ud_ewt(Path(args.dest), Path(args.local) if args.local else None)


@contextmanager
def fetch_errors(args) -> Iterator[None]:
    """fetch-*: a failed download (no network) or a bad checksum in one line, naming the --local folder."""
    try:
        yield
    except ValueError as error:  # a checksum that does not match
        raise SystemExit(f"python -m spacy_pairatt {args.command}: error: {one_line(error)}") from error
    except OSError as error:  # no network, or a file that cannot be written
        reason = getattr(error, "reason", None) or one_line(error)
        if not args.local:
            where = "no --local folder was given"
        elif not Path(args.local).is_dir():
            where = f"the --local folder {args.local} does not exist"
        else:
            where = f"the --local folder {args.local} lacks some of the files"
        message = f"{where}, and the download failed: {reason}"
        raise SystemExit(f"python -m spacy_pairatt {args.command}: error: {message}") from error


def one_line(error: BaseException) -> str:
    """An error's message on one line; for a file error, the file and what went wrong."""
    if isinstance(error, OSError) and error.filename and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return " ".join(str(error).split()) or type(error).__name__


def at_least_one(text: str) -> int:
    """argparse type: a whole number >= 1."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def process_count(text: str) -> int:
    """argparse type: a number of processes, >= 1 or -1 (one per CPU)."""
    value = whole_number(text)
    if value < 1 and value != -1:
        raise argparse.ArgumentTypeError(f"must be at least 1, or -1 for one per CPU, got {value}")
    return value


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def ptb(args) -> None:
    from ..corpora.ptb import convert_ptb, fetch_ptb

    if args.command == "fetch-ptb":
        with fetch_errors(args):
            fetch_ptb(Path(args.dest), Path(args.local) if args.local else None)
        return
    try:
        convert_ptb(Path(args.src_dir), Path(args.out_dir))
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt ptb-convert: error: {one_line(error)}") from error


def mlm_adapt(args) -> None:
    from ..core.encoders import minilm_path
    from ..parse_files.parsing import ParseCommandError
    from ..study.mlm import adapt_encoder, read_sentences

    try:
        sentences = read_sentences(Path(args.train_text))
        adapt_encoder(
            args.encoder or minilm_path(),
            sentences,
            Path(args.output),
            steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            max_length=args.max_length,
            warmup_steps=args.warmup_steps,
            seed=args.seed,
            device=args.device,
        )
    except (ValueError, ParseCommandError) as error:
        raise SystemExit(f"python -m spacy_pairatt mlm-adapt: error: {error}") from error


def fetch_relation_data(args) -> None:
    from ..corpora import docred, semeval

    fetch = {"fetch-semeval": semeval.fetch_semeval, "fetch-docred": docred.fetch_docred}[args.command]
    with fetch_errors(args):
        fetch(Path(args.dest), Path(args.local) if args.local else None)


def convert_relation_data(args) -> None:
    from ..corpora import docred, semeval

    if args.command == "semeval-convert":
        semeval.convert_semeval(Path(args.src_dir), Path(args.out_dir), args.markers)
    else:
        docred.convert_docred(Path(args.src_dir), Path(args.out_dir))


def evaluate(args) -> None:
    from ..evaluation.parser_eval import evaluate_pipeline, write_json

    try:
        result = evaluate_pipeline(args.model, args.data, args.sentences, decoder=args.decoder)
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt evaluate: error: {error}") from error
    write_json(result, args.output)


def evaluate_relations(args) -> None:
    from ..evaluation.parser_eval import write_json
    from ..evaluation.relation_eval import evaluate_docred, evaluate_semeval

    if args.command == "semeval-evaluate":
        result = evaluate_semeval(args.model, args.data)
    else:
        result = evaluate_docred(args.model, args.tune, args.test, args.train)
    write_json(result, args.output)


def relations_table(args) -> None:
    """Tabulate relation evaluation JSON files given as NAME:PATH into markdown (and one JSON)."""
    import json

    from ..evaluation.parser_eval import replace_marked_block, write_json
    from ..evaluation.relation_eval import relations_table as tabulate

    rows = []
    for spec in args.results:
        if ":" not in spec:
            raise SystemExit(f"python -m spacy_pairatt relations-table: error: {spec!r} is not NAME:PATH")
        name, path = spec.split(":", 1)
        rows.append((name, json.loads(Path(path).read_text(encoding="utf8"))))
    text = tabulate(rows)
    if args.output:
        Path(args.output).write_text((args.title + "\n\n" if args.title else "") + text, encoding="utf8")
    if args.json:
        from ..provenance import provenance

        results = [{"name": name, **result} for name, result in rows]
        write_json({"results": results, "provenance": provenance()}, args.json)
    if args.readme:
        readme = Path(args.readme)
        readme.write_text(replace_marked_block(readme.read_text(encoding="utf8"), "relations", text), "utf8")
    print(text)


def table(args) -> None:
    """Tabulate evaluation JSON files given as NAME:SPLIT:PATH into markdown."""
    import json

    from ..evaluation.parser_eval import replace_marked_block, results_table

    rows = []
    for spec in args.results:
        if spec.count(":") < 2:
            raise SystemExit(f"python -m spacy_pairatt table: error: {spec!r} is not NAME:SPLIT:PATH")
        name, split, path = spec.split(":", 2)
        rows.append({"name": name, "split": split, "result": json.loads(Path(path).read_text(encoding="utf8"))})
    text = results_table(rows)
    if args.output:
        Path(args.output).write_text((args.title + "\n\n" if args.title else "") + text, encoding="utf8")
    if args.readme:
        readme = Path(args.readme)
        readme.write_text(replace_marked_block(readme.read_text(encoding="utf8"), args.readme_marker, text), "utf8")
    print(text)


def docs_tables(args) -> None:
    """Rewrite (or, with --check, compare) every generated block of README.md and docs/*.md from results/."""
    from ..evaluation.parser_eval import write_json
    from ..release.docs_tables import measure_footprint, regenerate

    root = Path(args.root)
    if args.measure_footprint:
        write_json(measure_footprint(root), str(root / "results" / "footprint.json"))
    try:
        changed = regenerate(root, check=args.check)
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt docs-tables: error: {error}") from error
    for entry in changed:
        print(("differs from results/: " if args.check else "rewritten: ") + entry)
    if args.check and changed:
        raise SystemExit("python -m spacy_pairatt docs-tables: error: run it without --check to regenerate")


def assemble(args) -> None:
    from ..release.packaging import assemble_pipeline

    assemble_pipeline(args.model, args.output, args.accuracy, args.senter, args.version)


def demo(args) -> None:
    from ..release.packaging import parse_examples

    parse_examples(args.model, args.output, args.text or None)


def parse(args) -> None:
    """One process (nlp.pipe, --n-process) or, with --scheduler / --dask-workers, Dask shards."""
    from ..parse_files.parsing import ParseCommandError, parse_file

    options = {
        "input_format": args.input_format,
        "output_format": args.output_format,
        "batch_size": args.batch_size,
        "progress": not args.no_progress,
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
                **options,
            )
            print(f"Wrote {len(shards)} shards to {args.output}", file=sys.stderr)
        else:
            parse_file(args.model, args.input, args.output, n_process=args.n_process, **options)
    except ParseCommandError as error:
        raise SystemExit(f"python -m spacy_pairatt parse: error: {error}") from error


def ud_eval(args) -> None:
    """CoNLL 2018 shared task scores of a system CoNLL-U file against a gold one (see docs/ud_pipeline.md)."""
    from ..evaluation.ud_eval import UDEvalError, evaluate_files, scores_table, write_results

    try:
        scores = evaluate_files(args.gold, args.system)
    except UDEvalError as error:
        raise SystemExit(f"python -m spacy_pairatt ud-eval: error: {error}") from error
    print(scores_table(scores))
    if args.output:
        write_results(scores, args.gold, args.system, args.output)


def ud_text(args) -> None:
    """The raw text of a CoNLL-U file's documents, one a line, for `parse` from raw text."""
    from ..evaluation.ud_eval import document_texts

    with open(args.conllu, encoding="utf8") as file:
        try:
            texts = document_texts(file)
        except (ValueError, IndexError) as error:
            message = f"{args.conllu} is not CoNLL-U ({error})"
            raise SystemExit(f"python -m spacy_pairatt ud-text: error: {message}") from None
    text = "".join(line + "\n" for line in texts)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text, encoding="utf8")
    else:
        sys.stdout.write(text)


def command_line() -> str:
    """This run's command, for the reports that say how they were made."""
    import shlex

    return "python -m spacy_pairatt " + shlex.join(sys.argv[1:])


def probe(args) -> None:
    """Probe a frozen encoder's pair features for dependency arcs (see docs/probing.md)."""
    from ..study.probing import run_probe, write_probe_report

    try:
        result = run_probe(
            Path(args.train),
            Path(args.eval),
            args.encoder,
            args.max_sentences or None,
            args.max_eval_sentences or None,
            args.negatives_per_word,
            args.seed,
            args.rounds,
            args.threads,
        )
        if args.importance_png:
            from ..study.visualize import plot_attention_gain

            plot_attention_gain(result["probes"]["both"]["importance"], Path(args.importance_png))
    except (ImportError, ValueError, FileNotFoundError) as error:
        raise SystemExit(f"python -m spacy_pairatt probe: error: {error}") from error
    print(write_probe_report(result, args.output_json, args.output_md, command_line(), args.importance_png))


def visualize(args) -> None:
    """attention / relation maps, a displaCy parse, or training curves (see docs/probing.md)."""
    from ..study import visualize as pictures
    from ..study.probing import PICTURE_BLOCKS

    output = Path(args.output)
    try:
        if args.mode in PICTURE_BLOCKS.values():
            maps = pictures.maps_from_probe(Path(args.probe)) if args.probe else pictures.parse_map_specs(args.maps)
            if args.mode == "attention":
                pictures.attention_picture(Path(args.conllu), args.sentence_index, maps, output, args.encoder)
                source = f"sentence {args.sentence_index} of {Path(args.conllu).name}"
            else:
                tagged = args.text or pictures.semeval_sentence(Path(args.semeval), args.id)
                pictures.relation_picture(tagged, maps, output, args.encoder)
                source = f"SemEval sentence {args.id}" if args.id else "the given sentence"
            if args.report:
                marker = {mode: marker for marker, mode in PICTURE_BLOCKS.items()}[args.mode]
                caption = pictures.picture_caption(args.mode, maps, source)
                pictures.report_picture(Path(args.report), marker, output, caption, command_line())
        elif args.mode == "parse":
            markup = pictures.render_parse(pictures.load_parser(args.model), args.text, page=output.suffix != ".svg")
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(markup, encoding="utf8")
        else:
            log = Path(args.log)
            pictures.plot_training_curves(pictures.parse_training_log(log.read_text(encoding="utf8")), output, log.name)
    except (ImportError, ValueError, FileNotFoundError) as error:
        raise SystemExit(f"python -m spacy_pairatt visualize {args.mode}: error: {error}") from error
    print(f"Saved {output}")


def ablation(args) -> None:
    """Train and score the Table 1 rows on one dataset, or tabulate them (see docs/ablation.md)."""
    from ..study.ablation import run_ablation, write_ablation_table

    try:
        if args.command == "ablation-run":
            if args.steps is None and not args.score_only:
                raise ValueError("--steps is required unless --score-only")
            run_ablation(
                args.dataset, args.train, args.dev, args.test, args.training_dir, args.results_dir, args.steps,
                args.seed, args.dev_limit, args.adapted_encoder, args.gpu_id, args.rows, not args.score_only,
            )  # fmt: skip
        else:
            print(write_ablation_table(args.results_dir, args.output, args.json, args.title, args.replicates or ()))
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt {args.command}: error: {error}") from error


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spacy_pairatt", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch-ud", help="UD English-EWT 2.16 into a folder (local copy or download)")
    fetch.add_argument("dest")
    fetch.add_argument("--local", help="folder with a local copy of the .conllu files, used when present")
    fetch.set_defaults(func=fetch_ud)
    fetch_treebank = commands.add_parser(
        "fetch-ptb", help="NLTK's PTB dependency sample (non-commercial) into a folder (local copy or download)"
    )
    fetch_treebank.add_argument("dest")
    fetch_treebank.add_argument("--local", help="folder holding dependency_treebank/ (a local copy), used when present")
    fetch_treebank.set_defaults(func=ptb)
    convert_treebank = commands.add_parser(
        "ptb-convert", help="the PTB sample to train/dev/test .spacy files (80/10/10 of the files, in order)"
    )
    convert_treebank.add_argument("src_dir", metavar="SRC_DIR", help="folder holding dependency_treebank/")
    convert_treebank.add_argument("out_dir", metavar="OUT_DIR")
    convert_treebank.set_defaults(func=ptb)
    adaptation = commands.add_parser(
        "mlm-adapt", help="continue masked-language-model training of an encoder on a training set's raw text"
    )
    adaptation.add_argument("--train-text", required=True, help="sentences: .conllu, .spacy or .txt (one a line)")
    adaptation.add_argument(
        "--encoder", help="Hugging Face model directory (or name) to start from (default: all-MiniLM-L6-v2)"
    )
    adaptation.add_argument("--output", required=True, help="directory for the adapted encoder and its tokenizer")
    adaptation.add_argument("--steps", type=int, default=1000, help="optimizer steps (default: 1000)")
    adaptation.add_argument("--batch-size", type=int, default=32, help="sentences per step (default: 32)")
    adaptation.add_argument("--lr", type=float, default=5e-5, help="peak learning rate (default: 5e-5)")
    adaptation.add_argument("--max-length", type=int, default=128, help="wordpieces per sentence (default: 128)")
    adaptation.add_argument("--warmup-steps", type=int, help="linear warm-up steps (default: 10%% of --steps)")
    adaptation.add_argument("--seed", type=int, default=0, help="seed of the head, shuffling and masking")
    adaptation.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    adaptation.set_defaults(func=mlm_adapt)
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
    evaluation.add_argument(
        "--decoder", choices=("mst", "greedy"), help="decode every pairatt_parser this way (default: as saved)"
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
    documents = commands.add_parser(
        "docs-tables", help="every generated block of README.md and docs/*.md from results/"
    )
    documents.add_argument("--root", default=".", help="the checkout (README.md, docs/, results/)")
    documents.add_argument("--check", action="store_true", help="write nothing; exit 1 when a block differs")
    documents.add_argument(
        "--measure-footprint", action="store_true", help="first write results/footprint.json (disk of stack and data)"
    )
    documents.set_defaults(func=docs_tables)
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
    dask = parsing.add_mutually_exclusive_group()
    dask.add_argument("--scheduler", metavar="ADDRESS", help="parse shards on the Dask cluster at this address")
    dask.add_argument(
        "--dask-workers", type=at_least_one, metavar="N", help="parse shards on a local Dask cluster of N processes"
    )
    parsing.add_argument(
        "--shard-size", type=at_least_one, default=1000, help="documents per Dask task and output file (default: 1000)"
    )
    parsing.set_defaults(func=parse)
    scoring = commands.add_parser("ud-eval", help="CoNLL 2018 shared task metrics of a system CoNLL-U file")
    scoring.add_argument("gold", help="gold .conllu file")
    scoring.add_argument("system", help="system .conllu file (the same text, spaces aside)")
    scoring.add_argument("--output", help="JSON file for the scores")
    scoring.set_defaults(func=ud_eval)
    raw_text = commands.add_parser("ud-text", help="raw text of a CoNLL-U file's documents, one a line")
    raw_text.add_argument("conllu", help=".conllu file with # text (and # newdoc) comments")
    raw_text.add_argument("--output", help="text file to write (default: stdout)")
    raw_text.set_defaults(func=ud_text)
    probing = commands.add_parser("probe", help="how well a frozen encoder's pair features find dependency arcs")
    probing.add_argument("train", help=".conllu the probes are fitted on")
    probing.add_argument("eval", help=".conllu the probes are scored on")
    probing.add_argument("--encoder", help="local Hugging Face model directory (default: all-MiniLM-L6-v2)")
    probing.add_argument("--max-sentences", type=int, default=1500, help="train sentences, 0: all (default: 1500)")
    probing.add_argument("--max-eval-sentences", type=int, default=300, help="eval sentences, 0: all (default: 300)")
    probing.add_argument("--negatives-per-word", type=int, default=3, help="sampled non-arcs per word (default: 3)")
    probing.add_argument("--seed", type=int, default=0, help="negative sampling and LightGBM seed (default: 0)")
    probing.add_argument("--rounds", type=int, default=100, help="boosting rounds per probe (default: 100)")
    probing.add_argument("--threads", type=int, default=0, help="LightGBM threads, 0: its default (default: 0)")
    probing.add_argument("--output-json", default="results/probe.json", help="(default: results/probe.json)")
    probing.add_argument("--output-md", default="results/probe.md", help="(default: results/probe.md)")
    probing.add_argument("--importance-png", help="PNG of the combined probe's gain per layer and head")
    probing.set_defaults(func=probe)
    pictures = commands.add_parser("visualize", help="attention maps, displaCy parses, training curves as pictures")
    modes = pictures.add_subparsers(dest="mode", required=True)
    for mode, what in (
        ("attention", "attention maps of a CoNLL-U sentence, gold arcs boxed (the paper's Fig. 3)"),
        ("relation", "attention maps of a SemEval sentence, entities marked (the paper's Fig. 4)"),
    ):
        maps = modes.add_parser(mode, help=what)
        if mode == "attention":
            maps.add_argument("conllu", help=".conllu file")
            maps.add_argument("--sentence-index", type=int, default=0, help="0-based sentence in the file")
        else:
            source = maps.add_mutually_exclusive_group(required=True)
            source.add_argument("--text", help="a sentence with <e1>..</e1> and <e2>..</e2>")
            source.add_argument("--semeval", help="SemEval-2010 Task 8 file (TRAIN_FILE.TXT, TEST_FILE_FULL.TXT)")
            maps.add_argument("--id", help="sentence id in the --semeval file")
        which = maps.add_mutually_exclusive_group(required=True)
        which.add_argument("--probe", help="probe results JSON: its two most important attention heads")
        which.add_argument("--maps", help="LAYER:HEAD[:a_ij|a_ji],... (1-based), e.g. 3:5,2:1:a_ji")
        maps.add_argument("--encoder", help="local Hugging Face model directory (default: all-MiniLM-L6-v2)")
        maps.add_argument("--output", required=True, help="PNG file")
        maps.add_argument("--report", help="markdown file (results/probe.md) whose picture block gets the PNG")
    parse_picture = modes.add_parser("parse", help="displaCy rendering of a pipeline's parses")
    parse_picture.add_argument("--model", required=True, help="package name or path of a pipeline")
    parse_picture.add_argument("--text", action="append", required=True, help="a text to parse (repeatable)")
    parse_picture.add_argument("--output", required=True, help=".html page, or .svg (one text)")
    curves = modes.add_parser("curves", help="loss and dev scores from a `spacy train` console log")
    curves.add_argument("log", help="the console output of spacy train (e.g. results/train_pairatt.log)")
    curves.add_argument("--output", required=True, help="PNG file")
    pictures.set_defaults(func=visualize)
    ablation_run = commands.add_parser(
        "ablation-run", help="train the Table 1 rows on one dataset to one step budget, score dev and test"
    )
    ablation_run.add_argument("dataset", help="name recorded with the results (ewt, ptb)")
    for split in ("train", "dev", "test"):
        ablation_run.add_argument(f"--{split}", required=True, help=f"{split} .spacy corpus")
    ablation_run.add_argument("--training-dir", required=True, help="folder for one spacy train output per model")
    ablation_run.add_argument("--results-dir", required=True, help="folder for the per-row JSON files")
    ablation_run.add_argument("--steps", type=int, help="training steps of every row (required unless --score-only)")
    ablation_run.add_argument("--seed", type=int, default=0, help="system.seed of every row (default: 0)")
    ablation_run.add_argument("--dev-limit", type=int, default=0, help="dev sentences for model-best, 0: all")
    ablation_run.add_argument("--adapted-encoder", help="mlm-adapt output for fea:mlm:emb+att")
    ablation_run.add_argument("--gpu-id", type=int, default=-1)
    ablation_run.add_argument("--rows", nargs="+", help="row keys to run (default: all)")
    ablation_run.add_argument(
        "--score-only", action="store_true", help="score the rows' existing model-best on dev and test, no training"
    )
    ablation_run.set_defaults(func=ablation)
    ablation_tabulate = commands.add_parser(
        "ablation-table", help="the Table 1 rows beside the paper's figures, and its orderings, as markdown and JSON"
    )
    ablation_tabulate.add_argument("--results-dir", required=True, help="folder with ewt/ and ptb/ of ablation-run")
    ablation_tabulate.add_argument("--output", help="markdown file to write")
    ablation_tabulate.add_argument("--json", help="JSON file to write")
    ablation_tabulate.add_argument("--title", default="", help="a line written above the tables")
    ablation_tabulate.add_argument(
        "--replicates", nargs="+", help="results folders of the same rows under other seeds (ablation-run --seed)"
    )
    ablation_tabulate.set_defaults(func=ablation)
    add_curve_commands(commands)
    return parser


def main(argv=None) -> None:
    """Errors a user can cause (a missing file or model, no network, a full disk) end in one line on stderr, exit 1."""
    args = build_parser().parse_args(argv)
    command = " ".join(filter(None, (args.command, getattr(args, "mode", None))))
    try:
        args.func(args)
    except OSError as error:
        raise SystemExit(f"python -m spacy_pairatt {command}: error: {one_line(error)}") from error
    except KeyboardInterrupt:
        raise SystemExit(f"python -m spacy_pairatt {command}: interrupted") from None
