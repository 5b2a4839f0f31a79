"""`python -m spacy_pairatt`: the project's commands, one subcommand each."""
import argparse
from pathlib import Path


def fetch_ud(args) -> None:
    from .corpora.ud import fetch_ud_ewt

    fetch_ud_ewt(Path(args.dest), Path(args.local) if args.local else None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spacy_pairatt", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch-ud", help="UD English-EWT 2.16 into a folder (local copy or download)")
    fetch.add_argument("dest")
    fetch.add_argument("--local", help="folder with a local copy of the .conllu files, used when present")
    fetch.set_defaults(func=fetch_ud)
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    args.func(args)
