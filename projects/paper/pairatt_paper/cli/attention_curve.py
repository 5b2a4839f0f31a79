"""`python -m pairatt_paper curve-subsets / curve-run / curve-table`: the attention curve's commands
(docs/attention_curve.md), thin wrappers over `attention_curve`, registered by `add_commands`."""

import argparse
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional


@contextmanager
def one_line_errors(args) -> Iterator[None]:
    """A ValueError (a missing corpus or subset, an unknown row) as one line, exit 1."""
    try:
        yield
    except ValueError as error:
        raise SystemExit(f"python -m pairatt_paper {args.command}: error: {error}") from error


def training_size(text: str) -> Optional[int]:
    """argparse type: a number of sentences >= 1, or "full" (None: the whole training set)."""
    if text == "full":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of sentences or 'full': {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def named_path(text: str) -> List[str]:
    """argparse type: DOMAIN=PATH."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"not DOMAIN=PATH: {text!r}")
    return [name, path]


def curve_subsets_cli(args) -> None:
    from ..attention_curve import write_subsets

    sizes = sorted({size for size in args.sizes if size is not None})  # "full" needs no subset
    with one_line_errors(args):
        manifest = write_subsets(source=args.source, out_dir=args.out_dir, sizes=sizes, seeds=sorted(set(args.seeds)))
    for subset in manifest["subsets"]:
        print(f"{subset['path']}: {subset['size']} of {manifest['n_source_docs']} documents, seed {subset['seed']}")


def curve_budget(args):
    """The `Budget` a `curve-run` command line gives: the task's, with its --*-steps options."""
    from ..attention_curve import TASKS, Budget

    default = TASKS[args.task].budget
    return Budget(
        steps_per_sentence=default.steps_per_sentence if args.steps_per_sentence is None else args.steps_per_sentence,
        min_steps=args.min_steps or default.min_steps,
        max_steps=args.max_steps or default.max_steps,
    )


def curve_run_cli(args) -> None:
    from ..attention_curve import Setup, estimate_cpu_seconds, plan_runs, run_command, run_curve

    if None in args.sizes and any(size is not None for size in args.sizes) and not args.subsets:
        raise SystemExit(f"python -m pairatt_paper {args.command}: error: sizes other than full need --subsets")
    budget = curve_budget(args)
    setup = Setup(
        train=args.train, dev=args.dev, tests=dict(args.test), training_dir=args.training_dir,
        results_dir=args.results_dir, subsets=args.subsets, budget=budget, gpu_id=args.gpu_id,
        dev_limit=args.dev_limit, encoder=args.encoder, reuse=args.reuse, jobs=args.jobs,
    )  # fmt: skip
    with one_line_errors(args):
        runs = plan_runs(task=args.task, dataset=args.dataset, rows=args.rows, sizes=args.sizes, seeds=args.seeds)
        if not args.dry_run:
            run_curve(runs, setup)
            return
    n_train = sizes_in_sentences(args.sizes, args.train)
    for run in runs:
        steps = budget.steps(n_train[run.size])
        print(f"{run.run_id}: {n_train[run.size]} sentences, {steps} steps")
        train = args.train if run.size is None else f"{args.subsets}/n{run.size}_s{run.seed}.spacy"
        print("  " + " ".join(run_command(run, setup, train, steps)))
    hours = estimate_cpu_seconds(runs, n_train, {args.task: budget}) / 3600
    print(f"{len(runs)} runs, about {hours:.1f} hours on 2 CPU cores")


def sizes_in_sentences(sizes: List[Optional[int]], train: str) -> Dict[Optional[int], int]:
    from pathlib import Path

    from ..attention_curve import count_docs

    n_train = {size: size for size in sizes if size is not None}
    if None in sizes:
        # before the corpus is converted its size is unknown: the cap (max_steps) is assumed
        n_train[None] = count_docs(train) if Path(train).exists() else 10**9
    return n_train


def curve_table_cli(args) -> None:
    from ..attention_curve_table import write_curve_table

    print(
        write_curve_table(
            results_dir=args.results_dir,
            output=args.output,
            json_output=args.json,
            png=args.png,
            title=args.title,
            n_resamples=args.resamples,
        )
    )


def add_commands(commands) -> None:
    """The three commands on the `python -m pairatt_paper` subparsers."""
    subsets = commands.add_parser("curve-subsets", help="seeded random subsets of a .spacy training set")
    subsets.add_argument("source", help=".spacy file to draw from (one sentence per document)")
    subsets.add_argument("out_dir", help="folder for n{SIZE}_s{SEED}.spacy and subsets.json")
    subsets.add_argument(
        "--sizes", type=training_size, nargs="+", required=True, help="documents per subset ('full' is skipped)"
    )
    subsets.add_argument(
        "--seeds", type=int, nargs="+", required=True, help="one subset per size and seed (repeats once)"
    )
    subsets.set_defaults(func=curve_subsets_cli)

    run = commands.add_parser("curve-run", help="train and score the attention curve's runs")
    run.add_argument("task", choices=("parser", "relations"))
    run.add_argument("dataset", help="name of the training data in run ids (ewt, semeval, semeval_markers)")
    run.add_argument("--train", required=True, help="the whole training set (.spacy), for size 'full'")
    run.add_argument("--dev", required=True, help="dev .spacy: model-best is chosen on it")
    run.add_argument("--test", type=named_path, action="append", required=True, help="DOMAIN=PATH, repeatable")
    run.add_argument("--subsets", help="curve-subsets folder of this training set (sizes other than full)")
    run.add_argument("--rows", nargs="+", required=True, help="parser: emb att ftatt; relations: emb att")
    run.add_argument("--sizes", type=training_size, nargs="+", required=True, help="sentences, or 'full'")
    run.add_argument("--seeds", type=int, nargs="+", required=True, help="training seeds (and subset seeds)")
    run.add_argument("--training-dir", required=True, help="folder for one spacy train output per run")
    run.add_argument("--results-dir", required=True, help="folder for runs/ and evaluations/")
    run.add_argument("--gpu-id", type=int, default=-1)
    run.add_argument("--dev-limit", type=int, default=0, help="dev sentences for model-best, 0: all")
    run.add_argument("--min-steps", type=int, help="fewest steps a run trains (default: the task's)")
    run.add_argument("--max-steps", type=int, help="most steps a run trains (default: the task's)")
    run.add_argument("--steps-per-sentence", type=float, help="steps per training sentence (default: the task's)")
    run.add_argument("--encoder", help="replace the configs' encoder (a Hugging Face model directory)")
    run.add_argument(
        "--reuse", choices=("same-code", "existing", "never"), default="same-code",
        help="which earlier results stand: same-code (written from clean code that has not changed since), "
        "existing (any), never",
    )  # fmt: skip
    run.add_argument(
        "--jobs", type=int, default=1,
        help="trainings at once: on a GPU several of these small models train side by side (8 on one H200); "
        "on a CPU keep 1",
    )  # fmt: skip
    run.add_argument("--dry-run", action="store_true", help="print the runs, steps, commands and a CPU time estimate")
    run.set_defaults(func=curve_run_cli)

    table = commands.add_parser("curve-table", help="the attention curve's markdown, JSON and picture")
    table.add_argument("--results-dir", required=True, help="folder with runs/ and evaluations/ of curve-run")
    table.add_argument("--output", help="markdown file to write")
    table.add_argument("--json", help="JSON file to write")
    table.add_argument("--png", help="picture to write (needs matplotlib)")
    table.add_argument("--title", default="", help="a line written above the tables")
    table.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default: 10,000)")
    table.set_defaults(func=curve_table_cli)
