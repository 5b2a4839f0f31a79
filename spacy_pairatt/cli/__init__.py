"""`python -m spacy_pairatt`: the user's commands, one subcommand each (the paper's study has its own,
`python -m pairatt_paper` in projects/paper, built with the same `main`)."""

import argparse
import os
import sys

from ..runs.signals import stop_signals_interrupt
from . import confidence, corpora, encoders, evaluate, parse, shipping, tokenizer, training
from .errors import describe_error

# Each module adds its commands; --help lists them in this order.
COMMAND_GROUPS = (
    corpora,
    encoders,
    training,
    tokenizer,
    parse,
    confidence,
    evaluate,
    shipping,
)
PROG = "python -m spacy_pairatt"


def build_parser(command_groups=COMMAND_GROUPS, prog=PROG, description=__doc__) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.set_defaults(records_provenance=True)  # a command that writes no results sets it False
    commands = parser.add_subparsers(dest="command", required=True)
    for group in command_groups:
        group.add_commands(commands)
    return parser


def main(argv=None, command_groups=COMMAND_GROUPS, prog=PROG, description=__doc__) -> None:
    """Errors a user can cause (a missing file or model, no network, a full disk) end in one line on stderr, exit 1;
    so does a stop signal (SIGINT, SIGTERM, SIGHUP), once the command has cleaned up (`spacy_pairatt.runs.signals`)."""
    parser = build_parser(command_groups, prog, description)
    args, unknown = parser.parse_known_args(argv)
    if unknown and not hasattr(args, "config_overrides"):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if unknown:
        args.config_overrides = unknown  # spaCy's --section.key value, for the commands that train
    command = " ".join(filter(None, (args.command, getattr(args, "mode", None))))
    if args.records_provenance:  # results files name the code as it was when the command started (git asked now)
        from ..reporting.provenance import code_at_start

        code_at_start()
    try:
        with stop_signals_interrupt():
            args.func(args)
    except BrokenPipeError:  # stdout's reader stopped (`| head`): it has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush is quiet
        raise SystemExit(0) from None
    except OSError as error:
        raise SystemExit(f"{prog} {command}: error: {describe_error(error)}") from error
    except KeyboardInterrupt:
        raise SystemExit(f"{prog} {command}: interrupted") from None
