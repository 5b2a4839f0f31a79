"""The generated blocks of figures: each a function from the results files to markdown ending in its
source note. Figures are rounded once, here, when printed."""

from functools import reduce
from importlib.util import module_from_spec, spec_from_file_location
from operator import getitem
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from spacy.util import load_config

from ..evaluation.parser_eval import percent, results_table
from .results import Results, source_note
from .ud_blocks import trained_steps

COMPARE_ROWS = (
    ("pairatt_parser", "dev", "results/pairatt_dev.json", "parser"),
    ("transition", "dev", "results/transition_dev.json", "transition"),
    ("pairatt_parser", "test", "results/pairatt_test.json", "parser"),
    ("transition", "test", "results/transition_test.json", "transition"),
)
SEGMENTATION_ROWS = tuple(
    (f"pairatt_parser+{name}", "dev-docs", f"results/pairatt_dev_docs_{source}.json", "parser")
    for name, source in (
        ("sentencizer", "sentencizer"), ("senter", "senter"), ("gold-sentences", "gold"), ("no-segmenter", "none"),
    )
)  # fmt: skip


def evaluation_block(results: Results, rows, command: str) -> str:
    present = [
        {"name": name, "split": split, "result": results.json(path)}
        for name, split, path, _ in rows
        if results.json(path) is not None
    ]
    table = results_table(present) + "\n" if present else ""
    sources = [(path, kind) for *_, path, kind in rows]
    return table + speed_days_note(results, sources) + source_note(results, sources, command)


def speed_days_note(results: Results, sources: Sequence[Tuple[str, str]]) -> str:
    """A warning when a table's words/s were measured on different days: on the machine these runs
    share, the transformer alone has timed more than twice as fast one day as the day before
    (`results/bench_speed.json` at 8482764 and 87946d3), so only rows of one day compare."""
    days = sorted({made.date[:10] for made in (results.made(*source) for source in sources) if made.date})
    if len(days) < 2:
        return ""
    return (
        f"*words/s compare only between rows made on the same day (these: {', '.join(days)}); "
        "interleaved timings: results/bench.md.*\n\n"
    )


def compare_block(results: Results) -> str:
    """The headline: both parsers on EWT dev and test (README)."""
    return evaluation_block(results, COMPARE_ROWS, "python -m spacy project run compare")


def segmentation_block(results: Results) -> str:
    """pairatt_parser on 10-sentence dev Docs with each sentence source (docs/parser.md)."""
    return evaluation_block(results, SEGMENTATION_ROWS, "python -m spacy project run evaluate")


def tokenizer_block(results: Results) -> str:
    """spaCy's English tokenizer and the UD English one on EWT: F1, rule effects (docs/ud_pipeline.md)."""
    from ..evaluation.tokenizer_eval import tokenizer_tables

    path = "results/tokenizer_ewt.json"
    result = results.json(path)
    table = tokenizer_tables(result) + "\n" if result else ""
    return table + source_note(results, [(path, "tokenizer")], "python -m spacy project run tokenizer-ewt")


RELATION_FILES = tuple(
    f"results/relations/{name}.json"
    for name in (
        "semeval_markers_emb_att_dev", "semeval_markers_emb_dev", "semeval_markers_emb_att_test",
        "semeval_markers_emb_test", "docred_emb_att_test", "docred_emb_test",
    )
)  # fmt: skip


def relations_block(results: Results) -> str:
    """SemEval and Re-DocRED tables, and what attention features add (docs/relations.md)."""
    from ..evaluation.relation_eval import relations_table

    rows = [("pairatt_rel", results.json(path)) for path in RELATION_FILES if results.json(path) is not None]
    gaps = [
        ("SemEval dev official macro-F1", "semeval_markers_", "dev", "rel_semeval_macro_f1"),
        ("SemEval test official macro-F1", "semeval_markers_", "test", "rel_semeval_macro_f1"),
        ("Re-DocRED test F1", "docred_", "test", "rel_docred_f1"),
        ("Re-DocRED test Ign F1", "docred_", "test", "rel_docred_ign_f1"),
        ("Re-DocRED test AUC", "docred_", "test", "rel_docred_auc"),
    ]
    measured = []
    for label, prefix, split, metric in gaps:
        gap = feature_gap(results, prefix, split, metric)
        if gap is not None:
            measured.append(f"{label} {gap:+.1f}")
    text = relations_table(rows) + "\n" if rows else ""
    if measured:
        text += "emb+att minus emb (points): " + "; ".join(measured) + ".\n\n"
    return text + source_note(
        results, [(p, "relations") for p in RELATION_FILES], "python -m spacy project run relations"
    )


def feature_gap(results: Results, prefix: str, split: str, metric: str) -> Optional[float]:
    """emb+att minus emb, in points, from exact scores (None when either is missing)."""
    with_att = results.json(f"results/relations/{prefix}emb_att_{split}.json")
    without = results.json(f"results/relations/{prefix}emb_{split}.json")
    scores = [(r or {}).get("scores", {}).get(metric) for r in (with_att, without)]
    return None if None in scores else 100 * (scores[0] - scores[1])


def bench_module(results: Results, name: str):
    """bench/{name}.py of the checkout (the renderer of its results/*.md), or None outside one."""
    path = results.root / "bench" / f"{name}.py"
    if not path.exists():
        return None
    spec = spec_from_file_location(f"pairatt_bench_{name}", path)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_table_module(results: Results):
    """bench/table.py, the renderer of results/bench.md."""
    return bench_module(results, "table")


BENCH_FILES = (("results/bench_speed.json", "bench"), ("results/bench_memory.json", "bench"))


def subsection(lines: Sequence[str]) -> str:
    """A section of results/bench.md one heading level down, for a doc's own section."""
    return "\n".join("#" + line if line.startswith("## ") else line for line in lines)


def bench_block(results: Results) -> str:
    """Speed and memory tables of results/bench.md, rendered by bench/table.py (docs/performance.md)."""
    table = bench_table_module(results)
    sections = []
    for (path, _), render in zip(BENCH_FILES, ("speed_lines", "memory_lines")):
        data = results.json(path)
        if data is not None and table is not None:
            sections.append(subsection(getattr(table, render)(data)))
    text = "\n\n".join(sections) + "\n\n" if sections else ""
    return text + source_note(results, BENCH_FILES, "python -m spacy project run bench")


# `compare`'s two trainings, and issue 15's bar on the first: peak RSS of the default config's training.
TRAINING_COST_FILES = (
    ("pairatt_parser (`configs/parser_minilm.cfg`)", "results/train_pairatt_cost.json", "parser"),
    ("transition parser (`configs/transition_minilm.cfg`)", "results/train_transition_cost.json", "transition"),
)
TRAINING_PEAK_RSS_BAR_MB = 4096


def training_cost_block(results: Results) -> str:
    """Steps, wall and CPU time and peak RSS of training each parser `compare` trains (docs/performance.md)."""
    runs = [(what, results.json(path)) for what, path, _ in TRAINING_COST_FILES]
    runs = [(what, cost) for what, cost in runs if cost is not None]
    lines = [
        "| training | steps | wall (min) | s/step | CPU (s) | peak RSS (MB) |",
        "|---|---|---|---|---|---|",
    ]
    for what, cost in runs:
        steps = trained_steps(cost["command"], results.root)
        lines.append(
            f"| {what} | {steps} | {cost['wall_seconds'] / 60:.1f} | {cost['wall_seconds'] / steps:.2f} | "
            f"{cost['cpu_seconds']:,.0f} | {cost['peak_rss_mb']:,.0f} |"
        )
    pairatt = results.json(TRAINING_COST_FILES[0][1])
    if pairatt is not None:
        met = pairatt["peak_rss_mb"] <= TRAINING_PEAK_RSS_BAR_MB
        lines += [
            "",
            f"Peak RSS of the pairatt_parser training ≤ {TRAINING_PEAK_RSS_BAR_MB:,} MB (issue 15): "
            f"{pairatt['peak_rss_mb']:,.0f} MB, {'met' if met else '**not met**'}. Commands as run: "
            + "; ".join(f"`{cost['command']}`" for _, cost in runs),
        ]
    sources = [(path, kind) for _, path, kind in TRAINING_COST_FILES]
    return "\n".join(lines) + "\n\n" + source_note(results, sources, "python -m spacy project run compare")


RELATIONS_MEMORY_FILE = "results/bench_relations_memory.json"


def relations_memory_block(results: Results) -> str:
    """Time and peak RSS growth of pairatt_rel on one Doc of many entities (docs/relations.md)."""
    table = bench_table_module(results)
    data = results.json(RELATIONS_MEMORY_FILE)
    text = "" if data is None or table is None else subsection(table.relations_memory_lines(data)) + "\n\n"
    # pairatt_rel's figures ("relations"), though a bench script makes them: what changes the parser's
    # bench (its training step, say) leaves them as they are.
    return text + source_note(
        results, [(RELATIONS_MEMORY_FILE, "relations")], "python -m spacy project run bench-relations-memory"
    )


# bench-gpu's files: training cost and test scores are pairatt_parser results, the last is bench/speed.py's.
GPU_FILES = (
    ("results/gpu/train_pairatt_cost.json", "parser"),
    ("results/gpu/pairatt_test.json", "parser"),
    ("results/gpu/bench_speed.json", "bench"),
)


def gpu_block(results: Results) -> str:
    """`bench-gpu` on a lent GPU (docs/performance.md#on-a-gpu): an 800-step training, its EWT test scores
    and bench/speed.py. An occasional extra beside the CPU figures, so each part is simply left out
    (the note says "not measured yet") where its file is missing."""
    cost, test, speed = (results.json(path) for path, _ in GPU_FILES)
    parts = []
    if speed is not None:
        machine, run = speed["machine"], speed["provenance"]
        parts.append(
            f"Device: {machine['gpu'] or 'no GPU'}, {run['cores']} CPU cores; torch {run['versions']['torch']}."
        )
    if cost is not None:
        steps = (test or {}).get("model_config", {}).get("max_steps")  # patience = 0: no early stop
        per_step = (f"{steps} steps in ", f", {cost['wall_seconds'] / steps:.2f} s/step") if steps else ("", "")
        parts.append(
            f"Training (`{cost['command']}`): {per_step[0]}{cost['wall_seconds']:,.0f} s{per_step[1]} (wall "
            f"time: loading, initialisation and the dev evaluations included); peak RSS {cost['peak_rss_mb']:,.0f} "
            f"MB; peak GPU memory in use {cost['gpu_peak_used_mb']:,} MiB (nvidia-smi, all processes; "
            f"{cost['gpu_used_mb_before']:,} MiB before). Its log: `results/gpu/train_pairatt.log`."
        )
    if test is not None:
        parts.append(
            f"That model on EWT test, one gold sentence per Doc: UAS {percent(test['scores']['dep_uas'])}, LAS "
            f"{percent(test['scores']['dep_las'])}; a single run (seed {test['model_config']['seed']}) on a GPU, "
            "compared against nothing."
        )
    table = bench_table_module(results)
    if speed is not None and table is not None:
        lines = table.speed_lines(speed)  # without its heading and the cProfile stages (docs/performance.md)
        lines = lines[2 : next(i for i, line in enumerate(lines) if line.startswith("Profile of")) - 1]
        allocated = speed["machine"].get("gpu_peak_allocated_mb")
        if allocated is not None:
            lines += ["", f"Peak GPU memory torch allocated over the whole bench: {allocated:,.0f} MiB."]
        parts.append("\n".join(lines) + f"\n\nBench as run: `{speed['provenance']['command']}`.")
    text = "\n\n".join(parts) + "\n\n" if parts else ""
    return text + source_note(results, GPU_FILES, "python -m spacy project run bench-gpu . --vars.gpu_id 0")


WIDTH_SWEEP_FILE = "results/gpu/width_sweep.json"


def width_sweep_block(results: Results) -> str:
    """bench/sweep.py over the scorer's widths (docs/performance.md): EWT dev at every evaluation, and each
    narrower pair against the config's own, the model change that issue 15's speed bars would need."""
    record, sweep = results.json(WIDTH_SWEEP_FILE), bench_module(results, "sweep")
    text = ""
    if record is not None and sweep is not None:
        lines = sweep.markdown(record).splitlines()[2:]  # without its heading
        config = load_config(results.root / record["config"])
        own = ",".join(str(reduce(getitem, setting.split("."), config)) for setting in record["settings"])
        names = " / ".join(sweep.short_name(setting) for setting in record["settings"])
        best = {run["value"]: run["best"] for run in record["runs"]}
        others = [value for value in best if value != own] if own in best else []
        for value in others:
            uas, las = (best[value][score] - best[own][score] for score in ("dep_uas", "dep_las"))
            lines.append(
                f"\n{names} {value} against the config's {own}, model-best on dev (one seed): "
                f"UAS {uas:+.2f}, LAS {las:+.2f}."
            )
        commands = "; ".join(f"`{command}`" for command in record["commands"].values())
        lines.append(f"\nDevice: {record['device']}. Trainings as run: {commands}.")
        text = "\n".join(lines) + "\n\n"
    command = "python bench/sweep.py --setting ... --results results/gpu/width_sweep"
    return text + source_note(results, [(WIDTH_SWEEP_FILE, "parser")], command)


def ablation_files(results: Results, folders: Sequence[str], pattern: str) -> List[Tuple[str, str]]:
    """(path, result kind) of the files matching `pattern` in results/`folder` for each folder."""
    return [
        (str(path.relative_to(results.root)), "transition" if path.name.startswith("transition") else "parser")
        for folder in folders
        for path in sorted((results.root / "results" / folder).glob(pattern))
    ]


def ablation_sources(results: Results) -> List[Tuple[str, str]]:
    """Each ablation row's test scores (the files the table is made of), in every results folder."""
    return ablation_files(results, ("ablation", "ablation_seed1", "ablation_seed2"), "*/*_test.json")


def ablation_block(results: Results) -> str:
    """Table 1 on both datasets, the orderings and the spread over seeds (docs/ablation.md)."""
    from ..study.ablation import DATASETS
    from ..study.ablation_table import dataset_markdown, seed_spread_markdown, verdict_text

    table = results.json("results/ablation.json")
    note = source_note(results, ablation_sources(results), "python -m spacy project run ablation")
    if table is None:
        return note
    parts = []
    for dataset in DATASETS:
        parts.append(f"### {table['datasets'][dataset.key]['name']} (test {', '.join(dataset.metrics).upper()})\n")
        parts.append(dataset_markdown(dataset, table["datasets"][dataset.key]["rows"]))
    names = [dataset.key for dataset in DATASETS]
    lines = [
        "| claim | comparison | metric | paper | " + " | ".join(names) + " |",
        "|---|---|---|---|" + "---|" * len(names),
    ]
    for entry in table["orderings"]:
        for metric in ("uas", "las"):
            cells = [verdict_text(entry[name][metric]) if metric in entry[name] else "–" for name in ("paper", *names)]
            lines.append(f"| {entry['claim']} | {entry['comparison']} | {metric.upper()} | " + " | ".join(cells) + " |")
    parts.append("### Orderings (test, difference in points, paired bootstrap over test sentences)\n")
    parts.append("\n".join(lines) + "\n")
    if table.get("seed_spread"):
        parts.append(seed_spread_markdown(table["seed_spread"]).replace("## ", "### ", 1))
    return "\n".join(parts) + "\n" + note


def train_seconds(results: Results, folder: str) -> Dict[str, float]:
    """Wall seconds of each `spacy train` process of an ablation results folder, by training name."""
    files = ablation_files(results, [folder], "*_train.json")
    return {Path(path).name[: -len("_train.json")]: results.json(path)["seconds"] for path, _ in files}


def ablation_learning_rate_block(results: Results) -> str:
    """The feature-based rows at the fine-tuned rows' learning rate, the reason for theirs (docs/ablation.md)."""
    folder = "results/ablation/ptb_fea_lr1e-4"
    files = [f"{folder}/{row}_{split}.json" for split in ("dev", "test") for row in ("fea_emb", "fea_emb_att")]
    note = source_note(results, [(path, "parser") for path in files], "python -m spacy_pairatt ablation-run ptb ...")
    scores = [(results.json(path) or {}).get("scores", {}).get("dep_uas") for path in files]
    if None in scores:
        return note
    return (
        f"At 1e-4 the feature-based rows were far from converged after 800 steps: PTB dev UAS {percent(scores[0])} "
        f"(fea:emb) and {percent(scores[1])} (fea:emb+att), test {percent(scores[2])} and {percent(scores[3])}, "
        f"the loss still falling (`{folder}/`).\n\n" + note
    )


def ablation_cost_block(results: Results) -> str:
    """What the Table 1 trainings took, summed from each row's training record (docs/ablation.md)."""
    datasets = {"EWT": "ablation/ewt", "PTB": "ablation/ptb"}
    sources = ablation_files(results, list(datasets.values()), "*_train.json")
    parts = []
    for name, folder in datasets.items():
        seconds = train_seconds(results, folder)
        if seconds:
            fine_tuned = ", ".join(f"{key} {value:,.0f} s" for key, value in seconds.items() if key.startswith("ft_"))
            parts.append(
                f"{sum(seconds.values()):,.0f} s on {name} ({fine_tuned}; transition "
                f"{seconds.get('transition', 0):,.0f} s)"
            )
    text = ""
    if parts:
        total = sum(sum(train_seconds(results, folder).values()) for folder in datasets.values())
        text = (
            "Measured: the `spacy train` processes of all rows took " + " and ".join(parts) + f", {total / 3600:.1f} "
            "hours in all, before the masked-LM adaptations and the dev and test scoring of each row.\n\n"
        )
    return text + source_note(results, sources, "python -m spacy project run ablation")


def probe_block(results: Results) -> str:
    """The probe's UAS and importance summary (docs/probing.md)."""
    probe = results.json("results/probe.json")
    note = source_note(results, [("results/probe.json", "probe")], "python -m spacy project run probing")
    if probe is None:
        return note
    data, probes = probe["data"], probe["probes"]
    both = probes["both"]["importance"]
    top = both["top_attention"][0] if both["top_attention"] else None
    lines = [
        f"On {data['train']['sentences']:,} EWT train sentences ({data['train']['pairs']:,} pairs) and "
        f"{data['eval']['sentences']:,} dev sentences ({data['eval']['words']:,} words), eval UAS: "
        + ", ".join(f"{name} {percent(p['uas'])}" for name, p in probes.items())
        + f". {both['top_k_attention']} of the combined probe's {both['top_k']} most important features are "
        f"attention weights (the paper: all {both['top_k']}); attention features carry "
        f"{100 * both['attention_gain_share']:.0f}% of the gain"
        + (
            f", the first being `{top['feature']}` ({top['direction']}, {100 * top['gain_share']:.0f}% of the gain)."
            if top
            else "."
        ),
        "",
    ]
    return "\n".join(lines) + "\n" + note
