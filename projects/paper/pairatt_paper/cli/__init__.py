"""`python -m pairatt_paper`: the study's commands, on the library's command runner (`spacy_pairatt.cli.main`:
one-line errors, stop signals, provenance)."""

from spacy_pairatt.cli import main as run_commands

from . import ablation, attention_curve, encoders, probing

# --help lists them in this order.
COMMAND_GROUPS = (probing, ablation, attention_curve, encoders)
PROG = "python -m pairatt_paper"


def main(argv=None) -> None:
    run_commands(argv, COMMAND_GROUPS, PROG, __doc__)
