"""evaluate, table, semeval-evaluate, docred-evaluate, relations-table, ud-eval, ud-table, ud-text,
segmenter-sweep: scores of trained pipelines and their tables (`spacy_pairatt.evaluation`)."""

import sys
from pathlib import Path

from .parse import at_least_one, probability


def evaluate_command(args) -> None:
    from ..evaluation.parser_eval import evaluate_pipeline
    from ..reporting.tables import report_json

    if args.gpu_id >= 0:
        import spacy

        spacy.require_gpu(args.gpu_id)
    try:
        options = dict(decoder=args.decoder, without=args.without, per_document=bool(args.arcs))
        result = evaluate_pipeline(args.model, args.data, args.sentences, **options)
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt evaluate: error: {error}") from error
    if args.arcs:
        from ..reporting.json_files import write_json

        write_json(args.arcs, result.pop("arc_counts"), compact=True)
    report_json(result, args.output)


def evaluate_relations(args) -> None:
    from ..evaluation.relation_eval import evaluate_docred, evaluate_semeval
    from ..reporting.tables import report_json

    if args.command == "semeval-evaluate":
        result = evaluate_semeval(args.model, args.data)
    else:
        result = evaluate_docred(args.model, args.tune, args.test, args.train)
    report_json(result, args.output)


def relations_table_command(args) -> None:
    """Tabulate relation evaluation JSON files given as NAME:PATH into markdown (and one JSON)."""
    import json

    from ..reporting.json_files import write_text
    from ..reporting.tables import relations_table as tabulate
    from ..reporting.tables import report_json

    rows = []
    for spec in args.results:
        if ":" not in spec:
            raise SystemExit(f"python -m spacy_pairatt relations-table: error: {spec!r} is not NAME:PATH")
        name, path = spec.split(":", 1)
        rows.append((name, json.loads(Path(path).read_text(encoding="utf8"))))
    text = tabulate(rows)
    if args.output:
        write_text(args.output, (args.title + "\n\n" if args.title else "") + text)
    if args.json:
        from ..reporting.provenance import provenance

        results = [{"name": name, **result} for name, result in rows]
        report_json({"results": results, "provenance": provenance()}, args.json)
    print(text)


def table(args) -> None:
    """Tabulate evaluation JSON files given as NAME:SPLIT:PATH into markdown."""
    import json

    from ..reporting.json_files import write_text
    from ..reporting.tables import results_table

    rows = []
    for spec in args.results:
        if spec.count(":") < 2:
            raise SystemExit(f"python -m spacy_pairatt table: error: {spec!r} is not NAME:SPLIT:PATH")
        name, split, path = spec.split(":", 2)
        rows.append({"name": name, "split": split, "result": json.loads(Path(path).read_text(encoding="utf8"))})
    text = results_table(rows)
    if args.output:
        write_text(args.output, (args.title + "\n\n" if args.title else "") + text)
    print(text)


def ud_eval(args) -> None:
    """CoNLL 2018 shared task scores of a system CoNLL-U file against a gold one (see docs/ud_pipeline.md)."""
    from ..corpora.ud_documents import paragraph_starts, read_ud_documents
    from ..evaluation.ud_errors import error_analysis, errors_summary, sentence_errors_markdown
    from ..evaluation.ud_eval import evaluate, scores_table, write_results
    from ..evaluation.ud_treebank import UDEvalError, load_conllu
    from ..reporting.json_files import write_text

    try:
        gold, system = load_conllu(args.gold), load_conllu(args.system)
        scores = evaluate(gold, system)
    except UDEvalError as error:
        raise SystemExit(f"python -m spacy_pairatt ud-eval: error: {error}") from error
    print(scores_table(scores))
    errors = None
    if args.errors or args.sentence_errors:
        with open(args.gold, encoding="utf8") as file:
            paragraphs = paragraph_starts(read_ud_documents(file))
        errors = error_analysis(gold, system, top=args.errors or 20, paragraph_starts=paragraphs)
        print("\n".join(errors_summary(errors)))
    if args.sentence_errors:
        title = f"# Sentence boundary errors of {args.system} against {args.gold} (python -m spacy_pairatt ud-eval)"
        write_text(args.sentence_errors, sentence_errors_markdown(errors, title))
    if args.output:
        write_results(scores, args.gold, args.system, args.output, errors=errors if args.errors else None)


def ud_table(args) -> None:
    """A markdown table of `ud-eval --output` files given as NAME:PATH."""
    from ..evaluation.ud_eval import ud_results_table
    from ..reporting.json_files import read_json, write_text

    rows = []
    for spec in args.results:
        name, separator, path = spec.partition(":")
        if not separator or not name:
            raise SystemExit(f"python -m spacy_pairatt ud-table: error: {spec!r} is not NAME:PATH")
        try:
            result = read_json(path)
        except (OSError, ValueError):  # unreadable, or not JSON
            result = None
        if not isinstance(result, dict) or "metrics" not in result:
            raise SystemExit(f"python -m spacy_pairatt ud-table: error: {path} is not an ud-eval --output file")
        rows.append((name, result))
    try:
        text = (args.title + "\n\n" if args.title else "") + ud_results_table(rows, args.metrics)
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt ud-table: error: {error}") from error
    if args.output:
        write_text(args.output, text)
    print(text, end="")


def segmenter_sweep(args) -> None:
    """Tokens, Words and Sentences F1 of a pipeline's pairatt_segmenter at each threshold, on the raw
    text of a gold CoNLL-U file, and with --members for each count of its ensemble's first members;
    with --store, the best is saved in the pipeline (its ensemble cut to the best count)."""
    import spacy

    from ..evaluation.segmentation import store_threshold, sweep_markdown, threshold_sweep
    from ..evaluation.ud_treebank import UDEvalError
    from ..reporting.json_files import write_text
    from ..reporting.provenance import provenance
    from ..reporting.tables import report_json

    try:
        nlp = spacy.load(args.model)
        sweep = {"model": args.model, **threshold_sweep(nlp, args.gold, args.thresholds, args.members)}
        if args.store:
            store_threshold(nlp, Path(args.model), sweep["best"], sweep.get("best_members"))
    except (OSError, ValueError, UDEvalError) as error:
        raise SystemExit(f"python -m spacy_pairatt segmenter-sweep: error: {error}") from error
    report_json({**sweep, "stored": args.store, "provenance": provenance()}, args.output)
    if args.markdown:
        title = "# The segmenter's threshold on raw text (python -m spacy_pairatt segmenter-sweep)"
        write_text(args.markdown, sweep_markdown(sweep, title))


def ud_text(args) -> None:
    """The raw text of a CoNLL-U file for `parse`: a paragraph a line, a blank line between documents."""
    from ..corpora.ud_documents import raw_text
    from ..reporting.json_files import write_text

    with open(args.conllu, encoding="utf8") as file:
        try:
            text = raw_text(file, paragraphs=not args.documents)
        except ValueError as error:
            message = f"{args.conllu} is not CoNLL-U ({error})"
            raise SystemExit(f"python -m spacy_pairatt ud-text: error: {message}") from None
    if args.output:
        write_text(args.output, text)
    else:
        sys.stdout.write(text)


def add_commands(commands) -> None:
    """Its commands on the `python -m spacy_pairatt` subparsers."""
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
    relation_table.set_defaults(func=relations_table_command)
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
    evaluation.add_argument("--gpu-id", type=int, default=-1, help="GPU to parse on (-1: CPU)")
    evaluation.add_argument(
        "--arcs", help="JSON file for each document's arc counts (what a paired bootstrap between two models reads)"
    )
    evaluation.add_argument(
        "--without", nargs="+", default=[], metavar="NAME", help="components to remove before parsing (timing)"
    )
    evaluation.set_defaults(func=evaluate_command)
    tabulate = commands.add_parser("table", help="markdown table from evaluation JSON files")
    tabulate.add_argument("results", nargs="+", help="NAME:SPLIT:PATH of an evaluate --output file")
    tabulate.add_argument("--output", help="markdown file to write")
    tabulate.add_argument("--title", default="", help="a line written above the table")
    tabulate.set_defaults(func=table)
    scoring = commands.add_parser("ud-eval", help="CoNLL 2018 shared task metrics of a system CoNLL-U file")
    scoring.add_argument("gold", help="gold .conllu file")
    scoring.add_argument("system", help="system .conllu file (the same text, spaces aside)")
    scoring.add_argument("--output", help="JSON file for the scores")
    scoring.add_argument(
        "--errors",
        type=at_least_one,
        default=0,
        metavar="N",
        help="also count wrong lemmas and sentence boundaries by kind, with the N commonest of each",
    )
    scoring.add_argument(
        "--sentence-errors",
        metavar="MD",
        help="markdown file for the missed and false sentence boundaries by kind, with examples",
    )
    scoring.set_defaults(func=ud_eval)
    ud_tabulate = commands.add_parser("ud-table", help="markdown table of ud-eval --output files")
    ud_tabulate.add_argument("results", nargs="+", help="NAME:PATH of an ud-eval --output file")
    ud_tabulate.add_argument("--metrics", nargs="+", default=["Tokens", "Words", "Sentences"], metavar="METRIC")
    ud_tabulate.add_argument("--title", default="", help="a line written above the table")
    ud_tabulate.add_argument("--output", help="markdown file to write")
    ud_tabulate.set_defaults(func=ud_table)
    sweep = commands.add_parser(
        "segmenter-sweep", help="Tokens, Words and Sentences F1 of a pipeline's pairatt_segmenter at each threshold"
    )
    sweep.add_argument("model", help="pipeline with a tokenizer and one pairatt_segmenter")
    sweep.add_argument("gold", help="gold .conllu file; its raw text (ud-text's) is segmented")
    sweep.add_argument("--thresholds", nargs="+", type=probability, default=[0.2, 0.3, 0.4, 0.5, 0.6], metavar="P")
    sweep.add_argument(
        "--members",
        nargs="+",
        type=at_least_one,
        metavar="K",
        help="for a TaggerEnsemble.v1 segmenter: average only its first K members, each K in turn",
    )
    sweep.add_argument(
        "--store",
        action="store_true",
        help="save the best threshold (and with --members, only the best count's members) in the pipeline, in place",
    )
    sweep.add_argument("--output", help="JSON file for the sweep")
    sweep.add_argument("--markdown", help="markdown table of the sweep")
    sweep.set_defaults(func=segmenter_sweep)
    raw_text = commands.add_parser(
        "ud-text", help="raw text of a CoNLL-U file: a paragraph a line, a blank line between documents"
    )
    raw_text.add_argument("conllu", help=".conllu file with # text (and # newdoc) comments")
    raw_text.add_argument("--output", help="text file to write (default: stdout)")
    raw_text.add_argument(
        "--documents", action="store_true", help="a document a line instead, its paragraphs joined by a space"
    )
    raw_text.set_defaults(func=ud_text, records_provenance=False)
