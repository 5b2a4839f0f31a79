"""encoders-table: the encoder comparison's results file and table (`pairatt_paper.encoders_table`)."""

from pathlib import Path


def encoders_table_command(args) -> None:
    from ..encoders_table import write_encoders_table

    write_encoders_table([Path(folder) for folder in args.results], Path(args.output_json), Path(args.output_md))


def add_commands(commands) -> None:
    """Its commands on the `python -m pairatt_paper` subparsers."""
    table = commands.add_parser(
        "encoders-table", help="results/encoders.json and a markdown table: one row per encoder and config"
    )
    table.add_argument(
        "--results", nargs="+", default=["results", "../../results"],
        help="folders of the runs' result files, the first that has a file wins (default: results ../../results)",
    )  # fmt: skip
    table.add_argument("--output-json", default="results/encoders.json")
    table.add_argument("--output-md", default="results/encoders.md")
    table.set_defaults(func=encoders_table_command)
