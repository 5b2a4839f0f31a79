"""`python -m spacy_pairatt`: the project's commands, one subcommand each."""

import argparse
import os
import sys

from ..runs.signals import stop_signals_interrupt
from . import (
    ablation,
    attention_curve,
    confidence,
    corpora,
    encoders,
    evaluate,
    parse,
    probing,
    shipping,
    tokenizer,
    training,
)
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
    probing,
    ablation,
    attention_curve,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spacy_pairatt", description=__doc__)
    parser.set_defaults(records_provenance=True)  # a command that writes no results sets it False
    commands = parser.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.add_commands(commands)
    return parser


def main(argv=None) -> None:
    """Errors a user can cause (a missing file or model, no network, a full disk) end in one line on stderr, exit 1;
    so does a stop signal (SIGINT, SIGTERM, SIGHUP), once the command has cleaned up (`spacy_pairatt.runs.signals`)."""
    parser = build_parser()
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
        raise SystemExit(f"python -m spacy_pairatt {command}: error: {describe_error(error)}") from error
    except KeyboardInterrupt:
        raise SystemExit(f"python -m spacy_pairatt {command}: interrupted") from None
