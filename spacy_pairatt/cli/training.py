"""train-resumable: `spacy train` with checkpoints every N steps and at SIGTERM, SIGINT or SIGHUP,
resumed by running the same command again (`spacy_pairatt.training.resumable`, docs/training.md)."""

import signal
from pathlib import Path


def train_resumable_command(args) -> None:
    """A run a signal stopped exits, after its checkpoint, with 128 + the signal's number (as if killed by it)."""
    from spacy.cli._util import import_code, parse_config_overrides, setup_gpu, show_validation_error

    from ..training.checkpoints import ResumeError
    from ..training.resumable import train_resumable

    overrides = parse_config_overrides(args.config_overrides)
    import_code(args.code)
    setup_gpu(args.gpu_id)
    try:
        with show_validation_error(args.config):
            outcome = train_resumable(
                Path(args.config),
                Path(args.output),
                checkpoint_every=args.checkpoint_every,
                keep=args.keep,
                use_gpu=args.gpu_id,
                overrides=overrides,
                restart=args.restart,
                checkpoints_path=Path(args.checkpoints) if args.checkpoints else None,
            )
    except ResumeError as error:
        raise SystemExit(f"python -m spacy_pairatt train-resumable: error: {error}") from None
    if outcome.stopped_by:
        print(f"{outcome.stopped_by}: stopped after {outcome.steps} steps; {outcome.checkpoint} resumes them")
        raise SystemExit(128 + signal.Signals[outcome.stopped_by].value)


def add_commands(commands) -> None:
    """Its commands on the `python -m spacy_pairatt` subparsers."""
    train = commands.add_parser(
        "train-resumable",
        help="spacy train with checkpoints every N steps and at SIGTERM/SIGINT/SIGHUP; run it again to resume",
        description="Train a spaCy config as `spacy train` does, checkpointing into OUTPUT/checkpoints; "
        "run again with the same OUTPUT, it resumes from the newest checkpoint that passes its checksums. An OUTPUT "
        "that holds a training but no such checkpoint is refused unless --restart. Config overrides "
        "(--training.max_steps 2000, --paths.train ...) go after CONFIG, as for spacy train.",
    )
    train.add_argument("config", help="the training config (.cfg)")
    train.add_argument("--output", "-o", required=True, help="output folder: model-best, model-last, checkpoints/")
    train.add_argument(
        "--checkpoints",
        help="the checkpoints' folder (default OUTPUT/checkpoints; ~ is your home), e.g. one under your cache "
        "that outlives the checkout: a run in a fresh checkout resumes from it and gets its model-best back",
    )
    train.add_argument(
        "--checkpoint-every", type=int, default=100, help="steps between checkpoints (default 100), at least 1"
    )
    train.add_argument("--keep", type=int, default=2, help="complete checkpoints kept, newest first (default 2)")
    train.add_argument(
        "--restart",
        action="store_true",
        help="start over from step 0, deleting OUTPUT's model-best and model-last and the checkpoints (without it, an "
        "OUTPUT that holds a training but no checkpoint to resume from is refused)",
    )
    train.add_argument("--gpu-id", "-g", type=int, default=-1, help="GPU id, or -1 for the CPU (default)")
    train.add_argument("--code", "-c", help="a Python file with registered functions, imported first")
    train.set_defaults(func=train_resumable_command, config_overrides=[], records_provenance=False)
