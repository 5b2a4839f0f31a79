"""docs-tables, assemble, demo: the docs' figures (from a checkout's results/, by its `docs_build/` tool), the
shipped pipeline and a look at it."""

import importlib
import sys
from pathlib import Path

DOCS_TOOL = "docs_build"  # the checkout's folder that writes README.md's and docs/*.md's generated blocks
PACKAGE_CHECKOUT = Path(__file__).resolve().parents[2]  # the checkout, where this package is installed editable


def docs_tool(root: Path):
    """The checkout's docs tool: `docs_build/` under `root`, else beside this package in an editable install.

    Outside a checkout (an installed wheel has no results/ or docs/) it is a one-line error."""
    for checkout in (Path(root).resolve(), PACKAGE_CHECKOUT):
        if (checkout / DOCS_TOOL / "__init__.py").is_file():
            if str(checkout) not in sys.path:
                sys.path.insert(0, str(checkout))
            return importlib.import_module(f"{DOCS_TOOL}.docs_tables")
    raise SystemExit(
        f"python -m spacy_pairatt docs-tables: error: {Path(root).resolve()} is not a checkout of spacy-pairatt "
        f"(no {DOCS_TOOL}/); run it from the repository, or pass --root"
    )


def docs_tables(args) -> None:
    """Rewrite (or, with --check, compare) every generated block of README.md and docs/*.md from results/."""
    tool, root = docs_tool(Path(args.root)), Path(args.root)
    if not args.model_card and not tool.doc_files(root):
        raise SystemExit(
            f"python -m spacy_pairatt docs-tables: error: no README.md or docs/*.md under {root.resolve()}: "
            "run it from a checkout of spacy-pairatt, or pass --root"
        )
    try:
        if args.measure_footprint:
            tool.write_footprint(root)
        if args.model_card:
            tool.write_model_card_notes(root, args.model_card, ud_pipeline=not args.parser_only)
            return
        changed = tool.regenerate(root, check=args.check)
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt docs-tables: error: {error}") from error
    for entry in changed:
        print(("differs from results/: " if args.check else "rewritten: ") + entry)
    if args.check and changed:
        raise SystemExit("python -m spacy_pairatt docs-tables: error: run it without --check to regenerate")


def assemble(args) -> None:
    from ..shipped_pipeline import assemble_pipeline

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
    from ..shipped_pipeline import parse_examples

    blank = next((text for text in args.text or [] if not text.strip()), None)
    if blank is not None:
        raise SystemExit(f"python -m spacy_pairatt demo: error: --text {blank!r} has no words to parse")
    parse_examples(args.model, args.output, args.text or None)


def write_source_stamp(args) -> None:
    """Write the checkout's commit and code hashes, for a copy of its tree (a GPU machine's)."""
    import json

    from ..provenance import SOURCE_STAMP_ENV, source_stamp

    try:
        stamp = source_stamp(Path(args.root).resolve())
    except ValueError as error:
        raise SystemExit(f"python -m spacy_pairatt source-stamp: error: {error}") from error
    Path(args.output).write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf8")
    print(f"{args.output}: commit {stamp['commit']}, {len(stamp['files'])} files; on the copy, set {SOURCE_STAMP_ENV}")


def add_commands(commands) -> None:
    """Its commands on the `python -m spacy_pairatt` subparsers."""
    documents = commands.add_parser(
        "docs-tables", help="every generated block of README.md and docs/*.md from results/"
    )
    documents.add_argument("--root", default=".", help="the checkout (README.md, docs/, results/)")
    documents.add_argument("--check", action="store_true", help="write nothing; exit 1 when a block differs")
    documents.add_argument(
        "--measure-footprint", action="store_true", help="first write results/footprint.json (disk of stack and data)"
    )
    documents.add_argument(
        "--model-card", metavar="PATH", help="instead, write the shipped model card's notes (for assemble --notes)"
    )
    documents.add_argument(
        "--parser-only", action="store_true", help="with --model-card: the parser alone's, not the UD pipeline's"
    )
    documents.set_defaults(func=docs_tables)
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
    assembly.add_argument("--senter", help="pipeline whose senter goes in front (default: the rule-based sentencizer)")
    assembly.add_argument("--version", help="package version for meta.json and the model card README.md")
    assembly.add_argument(
        "--ud-scores", help="ud-eval --output JSON (gold tokens) whose UPOS, XPOS, UFeats and Lemmas go into meta.json"
    )
    assembly.add_argument(
        "--sentence-scores", help="ud-eval --output JSON (raw text) whose Sentences P, R, F go into meta.json"
    )
    assembly.add_argument(
        "--notes", help="Markdown that ends the model card (in a checkout: docs-tables --model-card writes it)"
    )
    assembly.set_defaults(func=assemble)
    demonstration = commands.add_parser("demo", help="parse example sentences, print them, save a displaCy page")
    demonstration.add_argument("model")
    demonstration.add_argument("--output", help="HTML file for the displaCy rendering")
    demonstration.add_argument(
        "--text", action="append", help="a text to parse (repeatable); default: built-in examples"
    )
    demonstration.set_defaults(func=demo)
