"""calibrate, review: how sure the parser is (`spacy_pairatt.integration.doc_confidence`), measured and put to use."""

import heapq
import json
import os
import shutil
import sys
from pathlib import Path

from .errors import describe_error
from .parse import at_least_one


def calibrate(args) -> None:
    """Fit the temperatures on dev, store them in the pipeline, report calibration on dev and test.

    Every path is checked before the pipeline loads (the folder the pipeline goes to must be writable
    and have room for it), and the plot and the report are written before anything is stored, so a
    mistake leaves the pipeline as it was and a failed store loses no report. The pipeline is stored
    beside MODEL (or --store-in; a link is followed) and swapped in by rename: a run stopped at any
    moment leaves the old pipeline or the new one."""
    import spacy

    from ..evaluation.calibration import calibration_report, collect_decoded, plot_reliability
    from ..reporting.json_files import write_json
    from ..reporting.provenance import model_provenance, provenance
    from ..runs.scratch import check_pipeline_folder, replace_pipeline_folder

    for path in (args.model, args.dev, args.test):
        if not Path(path).exists():
            raise SystemExit(f"python -m spacy_pairatt calibrate: error: there is nothing at {path}")
    for option, path in (("--plot", args.plot), ("--output", args.output)):
        if path:
            check_output_file(option, Path(path), plot=option == "--plot")
    store_in = None if args.no_store else Path(args.store_in or args.model)
    if store_in is not None:
        try:
            check_pipeline_folder(store_in)  # --store-in may name a folder of other files
        except ValueError as error:
            raise SystemExit(f"python -m spacy_pairatt calibrate: error: {describe_error(error)}") from error
        fail = f"python -m spacy_pairatt calibrate: error: cannot store the pipeline in {store_in}"
        check_can_write(fail, Path(os.path.realpath(store_in)), folder_bytes(Path(args.model)))
    nlp = spacy.load(args.model)
    parsers = [name for name, pipe in nlp.pipeline if hasattr(pipe, "decode_chunks")]
    if not parsers:
        raise SystemExit(f"python -m spacy_pairatt calibrate: error: {args.model} has no pairatt_parser")
    parser = nlp.get_pipe(parsers[0])
    parser.cfg.update(arc_temperature=1.0, label_temperature=1.0)
    try:
        report = calibration_report(collect_decoded(nlp, args.dev), collect_decoded(nlp, args.test))
    except ValueError as error:  # an empty corpus, Docs without gold parses
        raise SystemExit(f"python -m spacy_pairatt calibrate: error: {describe_error(error)}") from error
    report.update(model=str(args.model), dev=str(args.dev), test=str(args.test), parser=parsers[0])
    report["model_config"] = model_provenance(nlp, args.model)
    report["provenance"] = provenance(seed=report["model_config"]["seed"])
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_reliability(report, args.plot)
    if store_in is not None:
        report["stored_in"] = str(store_in)
    print(write_json(args.output, report, sort_keys=True) if args.output else json.dumps(report, indent=2), flush=True)
    if store_in is not None:
        parser.cfg.update(arc_temperature=report["arc_temperature"], label_temperature=report["label_temperature"])
        try:
            replace_pipeline_folder(store_in, nlp.to_disk)
        except OSError as error:
            kept = f"the report is on stdout{f' and in {args.output}' if args.output else ''}"
            raise SystemExit(
                f"python -m spacy_pairatt calibrate: error: {describe_error(error)} ({kept}; {store_in} is as it was)"
            ) from error


def check_output_file(option: str, path: Path, plot: bool = False) -> None:
    """A one-line SystemExit when `path` cannot be written: a folder, under a file, in a folder this
    user cannot write, or (plot) an image format matplotlib does not know."""
    fail = f"python -m spacy_pairatt calibrate: error: {option} {path}"
    if path.is_dir():
        raise SystemExit(f"{fail} is a folder")
    check_can_write(fail, path)
    if plot and path.suffix:
        from matplotlib.backend_bases import FigureCanvasBase

        formats = FigureCanvasBase.get_supported_filetypes()
        if path.suffix[1:].lower() not in formats:
            raise SystemExit(
                f"{fail}: matplotlib writes no {path.suffix} files (it writes {', '.join(sorted(formats))})"
            )


def check_can_write(fail: str, path: Path, size: int = 0) -> None:
    """A one-line SystemExit (starting `fail`) unless `path` can be written: the nearest folder there is
    above it is a folder this user may write in, with `size` bytes free."""
    folder = next(parent for parent in path.absolute().parents if parent.exists())
    if not folder.is_dir():
        raise SystemExit(f"{fail}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SystemExit(f"{fail}: cannot write in {folder}")
    free = shutil.disk_usage(folder).free
    if free < size:
        raise SystemExit(f"{fail}: {folder} has {free / 2**20:.1f} MB free, the pipeline takes {size / 2**20:.1f} MB")


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def review(args) -> None:
    """Parse a file and list its least confident sentences first: where a person should look."""
    from ..parse_files.errors import ParseCommandError
    from ..parse_files.files import check_output_is_not_input, open_input
    from ..parse_files.parsing import StopAtError, load_pipeline, parse_docs
    from ..parse_files.reading import SOURCE_KEY, read_documents
    from ..parse_files.writing import json_record_line
    from ..runs.scratch import naming_path

    try:
        check_output_is_not_input(args.input, args.output)
        with open_input(args.input) as stream:
            nlp = load_pipeline(args.model)
            check_stores_confidence(nlp, args.model)
            least_sure = []  # a heap of the `top` least confident sentences, kept as (-confidence, ...)
            sources = StopAtError(read_documents(stream, args.input_format))
            for order, doc in enumerate(parse_docs(nlp, sources, args.batch_size)):
                for sent in doc.sents:
                    confidence = sent._.parse_confidence
                    if confidence is None:
                        continue
                    entry = (-confidence, -order, -sent.start, review_record(doc.user_data[SOURCE_KEY]["id"], sent))
                    if len(least_sure) < args.top:
                        heapq.heappush(least_sure, entry)
                    else:
                        heapq.heappushpop(least_sure, entry)
            if sources.error is not None:
                raise sources.error
    except ParseCommandError as error:
        raise SystemExit(f"python -m spacy_pairatt review: error: {error}") from error
    records = [entry[-1] for entry in sorted(least_sure, key=lambda entry: entry[:3], reverse=True)]
    output = open(args.output, "w", encoding="utf8") if args.output else sys.stdout
    with naming_path(args.output or "stdout"):
        try:
            for record in records:
                output.write(json_record_line(record) if args.json else review_line(record))
        finally:
            if args.output:
                output.close()


def check_stores_confidence(nlp, model) -> None:
    """A one-line error unless a pairatt_parser of the pipeline stores confidence (what review ranks)."""
    parsers = [(name, pipe) for name, pipe in nlp.pipeline if hasattr(pipe, "decode_chunks")]
    if not parsers:
        raise SystemExit(
            f"python -m spacy_pairatt review: error: {model} has no pairatt_parser (review ranks its confidence)"
        )
    if all(pipe.confidence == "none" for _, pipe in parsers):
        raise SystemExit(
            f"python -m spacy_pairatt review: error: {model}'s {parsers[0][0]} stores no confidence "
            f'(set confidence = "arcs" in [components.{parsers[0][0]}] of its config.cfg)'
        )


def review_record(doc_id: str, sent) -> dict:
    """A sentence's confidence, text and its least sure arc."""
    weakest = min(sent, key=lambda token: token._.head_prob if token._.head_prob is not None else 1.0)
    return {
        "id": doc_id,
        "parse_confidence": round(sent._.parse_confidence, 6),
        "text": sent.text,
        "least_sure_arc": {
            "token": weakest.i,
            "text": weakest.text,
            "head": weakest.head.i,
            "head_text": weakest.head.text,
            "dep": weakest.dep_,
            "head_prob": round(weakest._.head_prob, 4),
            "head_candidates": [[head, round(prob, 4)] for head, prob in weakest._.head_candidates],
        },
    }


def review_line(record: dict) -> str:
    arc = record["least_sure_arc"]
    return (
        f"{record['parse_confidence']:.4f}\t{record['id']}\t{record['text']}\n"
        f"\tleast sure: {arc['text']} <-{arc['dep']}- {arc['head_text']} (p={arc['head_prob']:.2f})\n"
    )


def add_commands(commands) -> None:
    """Its commands on the `python -m spacy_pairatt` subparsers."""
    calibration = commands.add_parser(
        "calibrate",
        help="fit the parser's confidence temperatures on dev, store them in the pipeline, report ECE on dev and test",
    )
    calibration.add_argument("model", help="path of a pipeline with a pairatt_parser")
    calibration.add_argument("dev", help=".spacy corpus the temperatures are fitted on")
    calibration.add_argument("test", help=".spacy corpus calibration is reported on")
    calibration.add_argument("--output", help="JSON file for the report (e.g. results/calibration.json)")
    calibration.add_argument("--plot", help="PNG file for the reliability diagrams")
    calibration.add_argument("--store-in", help="save the calibrated pipeline here instead of over MODEL")
    calibration.add_argument("--no-store", action="store_true", help="report only; leave the pipeline as it is")
    calibration.set_defaults(func=calibrate)
    reviewing = commands.add_parser(
        "review", help="parse a file and list its least confident sentences first (where to look first)"
    )
    reviewing.add_argument("model", help="package name or path of a pipeline with a pairatt_parser")
    reviewing.add_argument("input", help="text (one document a line) or CoNLL-U file, or - for stdin")
    reviewing.add_argument("--input-format", default="text", choices=("text", "paragraphs", "conllu"))
    reviewing.add_argument("--top", type=at_least_one, default=20, help="sentences to list (default: 20)")
    reviewing.add_argument("--batch-size", type=at_least_one, default=64, help="documents per batch (default: 64)")
    reviewing.add_argument("--json", action="store_true", help="one JSON object per sentence instead of text")
    reviewing.add_argument("--output", help="file to write (default: stdout)")
    reviewing.set_defaults(func=review, records_provenance=False)
