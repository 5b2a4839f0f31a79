"""mlm-adapt, ablation-run, ablation-table: the paper's Table 1 on our data, with the masked-LM adapted
encoder its fea:mlm row needs (`pairatt_paper.ablation`, `pairatt_paper.mlm`)."""

from pathlib import Path


def mlm_adapt(args) -> None:
    from spacy_pairatt.integration.encoders import minilm_path
    from spacy_pairatt.parse_files.errors import ParseCommandError

    from ..mlm import adapt_encoder, read_sentences

    try:
        sentences = read_sentences(Path(args.train_text))
        adapt_encoder(
            args.encoder or minilm_path(),
            sentences,
            Path(args.output),
            steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            max_length=args.max_length,
            warmup_steps=args.warmup_steps,
            seed=args.seed,
            device=args.device,
        )
    except (ValueError, ParseCommandError) as error:
        raise SystemExit(f"python -m pairatt_paper mlm-adapt: error: {error}") from error


def ablation(args) -> None:
    """Train and score the Table 1 rows on one dataset, or tabulate them (see docs/ablation.md)."""
    from ..ablation import run_ablation
    from ..ablation_table import write_ablation_table

    try:
        if args.command == "ablation-run":
            if args.steps is None and not args.score_only:
                raise ValueError("--steps is required unless --score-only")
            run_ablation(
                args.dataset, args.train, args.dev, args.test, args.training_dir, args.results_dir, args.steps,
                args.seed, args.dev_limit, args.adapted_encoder, args.gpu_id, args.rows, not args.score_only,
            )  # fmt: skip
        else:
            print(write_ablation_table(args.results_dir, args.output, args.json, args.title, args.replicates or ()))
    except ValueError as error:
        raise SystemExit(f"python -m pairatt_paper {args.command}: error: {error}") from error


def add_commands(commands) -> None:
    """Its commands on the `python -m pairatt_paper` subparsers."""
    adaptation = commands.add_parser(
        "mlm-adapt", help="continue masked-language-model training of an encoder on a training set's raw text"
    )
    adaptation.add_argument("--train-text", required=True, help="sentences: .conllu, .spacy or .txt (one a line)")
    adaptation.add_argument(
        "--encoder", help="Hugging Face model directory (or name) to start from (default: all-MiniLM-L6-v2)"
    )
    adaptation.add_argument("--output", required=True, help="directory for the adapted encoder and its tokenizer")
    adaptation.add_argument("--steps", type=int, default=1000, help="optimizer steps (default: 1000)")
    adaptation.add_argument("--batch-size", type=int, default=32, help="sentences per step (default: 32)")
    adaptation.add_argument("--lr", type=float, default=5e-5, help="peak learning rate (default: 5e-5)")
    adaptation.add_argument("--max-length", type=int, default=128, help="wordpieces per sentence (default: 128)")
    adaptation.add_argument("--warmup-steps", type=int, help="linear warm-up steps (default: 10%% of --steps)")
    adaptation.add_argument("--seed", type=int, default=0, help="seed of the head, shuffling and masking")
    adaptation.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    adaptation.set_defaults(func=mlm_adapt)
    ablation_run = commands.add_parser(
        "ablation-run", help="train the Table 1 rows on one dataset to one step budget, score dev and test"
    )
    ablation_run.add_argument("dataset", help="name recorded with the results (ewt, ptb)")
    for split in ("train", "dev", "test"):
        ablation_run.add_argument(f"--{split}", required=True, help=f"{split} .spacy corpus")
    ablation_run.add_argument("--training-dir", required=True, help="folder for one spacy train output per model")
    ablation_run.add_argument("--results-dir", required=True, help="folder for the per-row JSON files")
    ablation_run.add_argument("--steps", type=int, help="training steps of every row (required unless --score-only)")
    ablation_run.add_argument("--seed", type=int, default=0, help="system.seed of every row (default: 0)")
    ablation_run.add_argument("--dev-limit", type=int, default=0, help="dev sentences for model-best, 0: all")
    ablation_run.add_argument("--adapted-encoder", help="mlm-adapt output for fea:mlm:emb+att")
    ablation_run.add_argument("--gpu-id", type=int, default=-1)
    ablation_run.add_argument("--rows", nargs="+", help="row keys to run (default: all)")
    ablation_run.add_argument(
        "--score-only", action="store_true", help="score the rows' existing model-best on dev and test, no training"
    )
    ablation_run.set_defaults(func=ablation)
    ablation_tabulate = commands.add_parser(
        "ablation-table", help="the Table 1 rows beside the paper's figures, and its orderings, as markdown and JSON"
    )
    ablation_tabulate.add_argument("--results-dir", required=True, help="folder with ewt/ and ptb/ of ablation-run")
    ablation_tabulate.add_argument("--output", help="markdown file to write")
    ablation_tabulate.add_argument("--json", help="JSON file to write")
    ablation_tabulate.add_argument("--title", default="", help="a line written above the tables")
    ablation_tabulate.add_argument(
        "--replicates", nargs="+", help="results folders of the same rows under other seeds (ablation-run --seed)"
    )
    ablation_tabulate.set_defaults(func=ablation)
