"""`python -m docs_build` in projects/paper (`docs`, `docs-check`): rewrite, or with --check compare, every generated
block of the checkout's README.md and docs/*.md from both projects' results; or write the model card's notes."""

import argparse
from pathlib import Path

from .plan import PLAN

PROG = "python -m docs_build"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    parser.add_argument("--root", type=Path, default=Path(__file__).parents[3], help="the checkout (default: this one)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a block differs")
    parser.add_argument("--model-card", metavar="PATH", help="instead, write the model card's notes (assemble --notes)")
    tiers = "en_pairatt, en_pairatt_parser, en_pairatt_trf; default: en_pairatt"
    parser.add_argument("--tier", choices=sorted(PLAN["model_card"]), default="ud_pipeline",
                        help=f"with --model-card: whose card ({tiers})")  # fmt: skip
    args = parser.parse_args(argv)
    from spacy_pairatt.reporting.json_files import write_text

    from .limits import model_card_notes
    from .plan import doc_files, regenerate

    if not args.model_card and not doc_files(args.root):
        raise SystemExit(f"{PROG}: error: no README.md or docs/*.md in {args.root.resolve()}: --root is the checkout")
    try:
        if args.model_card:
            write_text(args.model_card, model_card_notes(args.root, args.tier))
        changed = [] if args.model_card else regenerate(args.root, check=args.check)
    except (OSError, ValueError) as error:  # a results file without a figure, a full disk
        raise SystemExit(f"{PROG}: error: {error}") from None
    for entry in changed:
        print(("differs from results/: " if args.check else "rewritten: ") + entry)
    if args.check and changed:
        raise SystemExit(f"{PROG}: error: run it without --check to regenerate")


if __name__ == "__main__":
    main()
