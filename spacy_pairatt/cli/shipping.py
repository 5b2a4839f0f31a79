"""assemble, demo, source-stamp: the shipped pipeline, a look at it, and the stamp of the code behind results made
on a copy of the checkout. (The docs' generated blocks are the paper project's: `python -m docs_build` there.)"""

from pathlib import Path


def assemble(args) -> None:
    from ..packaging.shipped_pipeline import assemble_pipeline

    try:
        assemble_pipeline(
            args.model,
            args.output,
            args.accuracy,
            args.senter,
            args.version,
            notes=Path(args.notes).read_text(encoding="utf8") if args.notes else "",
            ud_scores=args.ud_scores,
            sentence_scores=args.sentence_scores,
        )
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt assemble: error: {error}") from error


def demo(args) -> None:
    from ..packaging.shipped_pipeline import parse_examples

    blank = next((text for text in args.text or [] if not text.strip()), None)
    if blank is not None:
        raise SystemExit(f"python -m spacy_pairatt demo: error: --text {blank!r} has no words to parse")
    parse_examples(args.model, args.output, args.text or None)


def write_source_stamp(args) -> None:
    """Write the checkout's commit and code hashes, for a copy of its tree (a GPU machine's)."""
    import json

    from ..reporting.json_files import write_text
    from ..reporting.provenance import SOURCE_STAMP_ENV, source_stamp

    try:
        stamp = source_stamp(Path(args.root).resolve())
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt source-stamp: error: {error}") from error
    write_text(args.output, json.dumps(stamp, indent=1) + "\n")
    print(f"{args.output}: commit {stamp['commit']}, {len(stamp['files'])} files; on the copy, set {SOURCE_STAMP_ENV}")


def add_commands(commands) -> None:
    """Its commands on the `python -m spacy_pairatt` subparsers."""
    stamping = commands.add_parser(
        "source-stamp",
        help="the commit and code hashes of a clean checkout, for results made from a copy of its tree",
    )
    stamping.add_argument("output", help="the stamp to write (JSON)")
    stamping.add_argument("--root", default=".", help="the checkout")
    stamping.set_defaults(func=write_source_stamp)
    assembly = commands.add_parser(
        "assemble", help="trained pipeline + sentencizer + metadata, ready for spacy package"
    )
    assembly.add_argument("model")
    assembly.add_argument("output")
    assembly.add_argument("--accuracy", help="evaluate --output JSON whose scores go into meta.json")
    assembly.add_argument(
        "--senter",
        help="pipeline whose senter replaces the pipeline's own, or goes in front (default: the pipeline's own "
        "segmenter, else the rule-based sentencizer)",
    )
    assembly.add_argument("--version", help="package version for meta.json and the model card README.md")
    assembly.add_argument(
        "--ud-scores", help="ud-eval --output JSON (gold tokens) whose UPOS, XPOS, UFeats and Lemmas go into meta.json"
    )
    assembly.add_argument(
        "--sentence-scores", help="ud-eval --output JSON (raw text) whose Sentences P, R, F go into meta.json"
    )
    assembly.add_argument(
        "--notes", help="Markdown that ends the model card (in a checkout, projects/paper's `model-card` writes it)"
    )
    assembly.set_defaults(func=assemble, records_provenance=False)
    demonstration = commands.add_parser("demo", help="parse example sentences, print them, save a displaCy page")
    demonstration.add_argument("model")
    demonstration.add_argument("--output", help="HTML file for the displaCy rendering")
    demonstration.add_argument(
        "--text", action="append", help="a text to parse (repeatable); default: built-in examples"
    )
    demonstration.set_defaults(func=demo, records_provenance=False)
