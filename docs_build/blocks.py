"""The figures of the generated blocks: each renderer turns the results files into markdown that ends in a
blank line, or "" where its files are not there yet; docs_tables.BLOCKS adds each block's source note.
Figures are rounded once, here, when printed."""

from importlib.util import module_from_spec, spec_from_file_location
from typing import Dict, Iterable, List, Optional, Sequence

from spacy_pairatt.reports import percent, relations_table, results_table, tokenizer_tables

from .results import Results, Sources, speed_days_note


def table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A markdown table, without the blank line after it."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows])


def config_value(root, path: str, keys: str, overrides: Optional[Dict] = None, interpolate: bool = False):
    """A setting (dotted `keys`) of the config at `path` in the checkout `root`, read as spaCy's
    `load_config` does (by confection, which spaCy uses: no spaCy import)."""
    from confection import Config

    config = Config().from_disk(root / path, overrides=overrides or {}, interpolate=interpolate)
    for key in keys.split("."):
        config = config[key]
    return config


def sweep_setting(root, path: str, keys: str):
    """A setting a sweep recorded, in the config as it is now: sweeps made before the model's pair scorer was
    renamed (`model.scorer` to `model.pair_scorer`) name it by the old key."""
    try:
        return config_value(root, path, keys)
    except KeyError:
        return config_value(root, path, keys.replace(".model.scorer.", ".model.pair_scorer."))


def bench_module(results: Results, name: str = "table"):
    """bench/{name}.py of the checkout (the renderer of its results/*.md), or None outside one."""
    path = results.root / "bench" / f"{name}.py"
    if not path.exists():
        return None
    spec = spec_from_file_location(f"pairatt_bench_{name}", path)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def subsection(lines: Sequence[str]) -> str:
    """A section of results/bench.md one heading level down, for a doc's own section."""
    return "\n".join("#" + line if line.startswith("## ") else line for line in lines)


def paths(rows: Sequence[Sequence]) -> Sources:
    """(path, kind): the last two fields of each row."""
    return [tuple(row[-2:]) for row in rows]


# The evaluation tables: (model, split, evaluate's output, result kind).
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


def evaluation_table(rows):
    """The renderer of a table of `evaluate` results: its rows that are there, and whether their speeds compare."""

    def render(results: Results) -> str:
        present = [{"name": n, "split": s, "result": results.json(p)} for n, s, p, _ in rows if results.json(p)]
        return (results_table(present) + "\n" if present else "") + speed_days_note(results, paths(rows))

    return render


def tokenizer_block(results: Results) -> str:
    result = results.json("results/tokenizer_ewt.json")
    return tokenizer_tables(result) + "\n" if result else ""


RELATION_FILES = tuple(
    (f"results/relations/{name}.json", "relations")
    for name in (
        "semeval_markers_emb_att_dev", "semeval_markers_emb_dev", "semeval_markers_emb_att_test",
        "semeval_markers_emb_test", "docred_emb_att_test", "docred_emb_test",
    )
)  # fmt: skip
FEATURE_GAPS = (
    ("SemEval dev official macro-F1", "semeval_markers_", "dev", "rel_semeval_macro_f1"),
    ("SemEval test official macro-F1", "semeval_markers_", "test", "rel_semeval_macro_f1"),
    ("Re-DocRED test F1", "docred_", "test", "rel_docred_f1"),
    ("Re-DocRED test Ign F1", "docred_", "test", "rel_docred_ign_f1"),
    ("Re-DocRED test AUC", "docred_", "test", "rel_docred_auc"),
)


def relations_block(results: Results) -> str:
    """SemEval and Re-DocRED tables, and what attention features add, in points from exact scores."""
    rows = [("pairatt_rel", results.json(path)) for path, _ in RELATION_FILES if results.json(path) is not None]
    measured = []
    for label, prefix, split, metric in FEATURE_GAPS:
        pair = [results.json(f"results/relations/{prefix}emb{att}_{split}.json") for att in ("_att", "")]
        scores = [(result or {}).get("scores", {}).get(metric) for result in pair]
        if None not in scores:
            measured.append(f"{label} {100 * (scores[0] - scores[1]):+.1f}")
    text = relations_table(rows) + "\n" if rows else ""
    return text + ("emb+att minus emb (points): " + "; ".join(measured) + ".\n\n" if measured else "")


BENCH_FILES = (("results/bench_speed.json", "bench"), ("results/bench_memory.json", "bench"))


def bench_block(results: Results) -> str:
    """Speed and memory sections of results/bench.md, rendered by bench/table.py."""
    bench, sections = bench_module(results), []
    for (path, _), render in zip(BENCH_FILES, ("speed_lines", "memory_lines")):
        if results.json(path) is not None and bench is not None:
            sections.append(subsection(getattr(bench, render)(results.json(path))))
    return "\n\n".join(sections) + "\n\n" if sections else ""


RELATIONS_MEMORY_FILE = "results/bench_relations_memory.json"


def relations_memory_block(results: Results) -> str:
    """Time and peak RSS growth of pairatt_rel on one Doc of many entities (bench/table.py)."""
    bench, data = bench_module(results), results.json(RELATIONS_MEMORY_FILE)
    return "" if data is None or bench is None else subsection(bench.relations_memory_lines(data)) + "\n\n"


# `compare`'s two trainings, and the bar on the first: peak RSS of the default config's training.
TRAINING_COST_FILES = (
    ("pairatt_parser (`configs/parser_minilm.cfg`)", "results/train_pairatt_cost.json", "parser"),
    ("transition parser (`configs/transition_minilm.cfg`)", "results/train_transition_cost.json", "transition"),
)
TRAINING_PEAK_RSS_BAR_MB = 4096


def trained_steps(command: str, root) -> int:
    """`training.max_steps` of a `spacy train CONFIG [--section.key value ...]` command run in the checkout
    `root`: its config as it is there, with the command's overrides (JSON values where they parse)."""
    import json
    import shlex

    def value(text: str):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    args = shlex.split(command)
    overrides = {name[2:]: value(v) for name, v in zip(args, args[1:]) if name.startswith("--") and "." in name}
    return int(config_value(root, args[args.index("train") + 1], "training.max_steps", overrides, True))


def training_cost_block(results: Results) -> str:
    """Steps, wall and CPU time and peak RSS of training each parser `compare` trains."""
    runs = [(what, results.json(path)) for what, path, _ in TRAINING_COST_FILES if results.json(path)]
    rows = []
    for what, cost in runs:
        steps = trained_steps(cost["command"], results.root)
        rows.append(
            (what, steps, f"{cost['wall_seconds'] / 60:.1f}", f"{cost['wall_seconds'] / steps:.2f}",
             f"{cost['cpu_seconds']:,.0f}", f"{cost['peak_rss_mb']:,.0f}")
        )  # fmt: skip
    text = table(("training", "steps", "wall (min)", "s/step", "CPU (s)", "peak RSS (MB)"), rows) + "\n"
    pairatt = results.json(TRAINING_COST_FILES[0][1])
    if pairatt is not None:
        met = "met" if pairatt["peak_rss_mb"] <= TRAINING_PEAK_RSS_BAR_MB else "**not met**"
        text += (
            f"\nPeak RSS of the pairatt_parser training, target ≤ {TRAINING_PEAK_RSS_BAR_MB:,} MB: "
            f"{pairatt['peak_rss_mb']:,.0f} MB, {met}. Commands as run: "
            + "; ".join(f"`{cost['command']}`" for _, cost in runs) + "\n"
        )  # fmt: skip
    return text + "\n"


# bench-gpu's files: training cost and test scores are pairatt_parser results, the last is bench/speed.py's.
GPU_FILES = (
    ("results/gpu/train_pairatt_cost.json", "parser"),
    ("results/gpu/pairatt_test.json", "parser"),
    ("results/gpu/bench_speed.json", "bench"),
)


def gpu_block(results: Results) -> str:
    """`bench-gpu` on a lent GPU: an 800-step training, its EWT test scores and bench/speed.py; each part is
    left out where its file is missing (the source note says "not measured yet")."""
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
        scores = test["scores"]
        parts.append(
            f"That model on EWT test, one gold sentence per Doc: UAS {percent(scores['dep_uas'])}, LAS "
            f"{percent(scores['dep_las'])}; a single run (seed {test['model_config']['seed']}) on a GPU, "
            "compared against nothing."
        )
    bench = bench_module(results)
    if speed is not None and bench is not None:
        lines = bench.speed_lines(speed)  # without its heading and the cProfile stages (misleading on a GPU)
        lines = lines[2 : next(i for i, line in enumerate(lines) if line.startswith("Profile of")) - 1]
        allocated = speed["machine"].get("gpu_peak_allocated_mb")
        if allocated is not None:
            lines += ["", f"Peak GPU memory torch allocated over the whole bench: {allocated:,.0f} MiB."]
        parts.append("\n".join(lines) + f"\n\nBench as run: `{speed['provenance']['command']}`.")
    return "\n\n".join(parts) + "\n\n" if parts else ""


WIDTH_SWEEP_FILE = "results/gpu/width_sweep.json"


def width_sweep_block(results: Results) -> str:
    """bench/sweep.py over the scorer's widths: EWT dev at every evaluation, and each narrower pair against
    the config's own."""
    record, sweep = results.json(WIDTH_SWEEP_FILE), bench_module(results, "sweep")
    if record is None or sweep is None:
        return ""
    lines = sweep.markdown(record).splitlines()[2:]  # without its heading
    own = ",".join(str(sweep_setting(results.root, record["config"], key)) for key in record["settings"])
    names = " / ".join(sweep.short_name(setting) for setting in record["settings"])
    best = {run["value"]: run["best"] for run in record["runs"]}
    for value in [value for value in best if value != own] if own in best else []:
        uas, las = (best[value][score] - best[own][score] for score in ("dep_uas", "dep_las"))
        lines.append(
            f"\n{names} {value} against the config's {own}, model-best on dev (one seed): "
            f"UAS {uas:+.2f}, LAS {las:+.2f}."
        )
    commands = "; ".join(f"`{command}`" for command in record["commands"].values())
    return "\n".join(lines + [f"\nDevice: {record['device']}. Trainings as run: {commands}."]) + "\n\n"


def ablation_files(results: Results, folders: Sequence[str], pattern: str) -> List:
    """(path, result kind) of the files matching `pattern` in results/`folder` for each folder."""
    return [
        (str(path.relative_to(results.root)), "transition" if path.name.startswith("transition") else "parser")
        for folder in folders
        for path in sorted((results.root / "results" / folder).glob(pattern))
    ]


def ablation_block(results: Results) -> str:
    """Table 1 on both datasets, the orderings and the spread over seeds."""
    from spacy_pairatt.study.ablation import DATASETS
    from spacy_pairatt.study.ablation_table import dataset_markdown, seed_spread_markdown, verdict_text

    found = results.json("results/ablation.json")
    if found is None:
        return ""
    parts, names = [], [dataset.key for dataset in DATASETS]
    for dataset in DATASETS:
        parts.append(f"### {found['datasets'][dataset.key]['name']} (test {', '.join(dataset.metrics).upper()})\n")
        parts.append(dataset_markdown(dataset, found["datasets"][dataset.key]["rows"]))
    rows = [
        (entry["claim"], entry["comparison"], metric.upper(),
         *(verdict_text(entry[name][metric]) if metric in entry[name] else "–" for name in ("paper", *names)))
        for entry in found["orderings"]
        for metric in ("uas", "las")
    ]  # fmt: skip
    parts.append("### Orderings (test, difference in points, paired bootstrap over test sentences)\n")
    parts.append(table(("claim", "comparison", "metric", "paper", *names), rows) + "\n")
    if found.get("seed_spread"):
        parts.append(seed_spread_markdown(found["seed_spread"]).replace("## ", "### ", 1))
    return "\n".join(parts) + "\n"


LR_FOLDER = "results/ablation/ptb_fea_lr1e-4"
LR_FILES = tuple(
    (f"{LR_FOLDER}/{row}_{split}.json", "parser") for split in ("dev", "test") for row in ("fea_emb", "fea_emb_att")
)


def ablation_learning_rate_block(results: Results) -> str:
    """The feature-based rows at the fine-tuned rows' learning rate, the reason for theirs."""
    scores = [(results.json(path) or {}).get("scores", {}).get("dep_uas") for path, _ in LR_FILES]
    if None in scores:
        return ""
    return (
        f"At 1e-4 the feature-based rows were far from converged after 800 steps: PTB dev UAS {percent(scores[0])} "
        f"(fea:emb) and {percent(scores[1])} (fea:emb+att), test {percent(scores[2])} and {percent(scores[3])}, "
        f"the loss still falling (`{LR_FOLDER}/`).\n\n"
    )


ABLATION_TRAININGS = {"EWT": "ablation/ewt", "PTB": "ablation/ptb"}


def ablation_cost_block(results: Results) -> str:
    """What the Table 1 trainings took, summed from each row's training record."""
    seconds = {
        name: {path.rsplit("/", 1)[-1][: -len("_train.json")]: results.json(path)["seconds"]
               for path, _ in ablation_files(results, [folder], "*_train.json")}
        for name, folder in ABLATION_TRAININGS.items()
    }  # fmt: skip
    parts = [
        f"{sum(rows.values()):,.0f} s on {name} ("
        + ", ".join(f"{key} {value:,.0f} s" for key, value in rows.items() if key.startswith("ft_"))
        + f"; transition {rows.get('transition', 0):,.0f} s)"
        for name, rows in seconds.items()
        if rows
    ]
    if not parts:
        return ""
    total = sum(sum(rows.values()) for rows in seconds.values())
    return (
        "Measured: the `spacy train` processes of all rows took " + " and ".join(parts) + f", {total / 3600:.1f} "
        "hours in all, before the masked-LM adaptations and the dev and test scoring of each row.\n\n"
    )


def probe_block(results: Results) -> str:
    """The probe's UAS and importance summary."""
    probe = results.json("results/probe.json")
    if probe is None:
        return ""
    data, probes = probe["data"], probe["probes"]
    both = probes["both"]["importance"]
    top = both["top_attention"][0] if both["top_attention"] else None
    first = (
        f", the first being `{top['feature']}` ({top['direction']}, {100 * top['gain_share']:.0f}% of the gain)."
        if top
        else "."
    )
    return (
        f"On {data['train']['sentences']:,} EWT train sentences ({data['train']['pairs']:,} pairs) and "
        f"{data['eval']['sentences']:,} dev sentences ({data['eval']['words']:,} words), eval UAS: "
        + ", ".join(f"{name} {percent(p['uas'])}" for name, p in probes.items())
        + f". {both['top_k_attention']} of the combined probe's {both['top_k']} most important features are "
        f"attention weights (the paper: all {both['top_k']}); attention features carry "
        f"{100 * both['attention_gain_share']:.0f}% of the gain{first}\n\n"
    )


CALIBRATION_COLUMNS = (
    "split", "temperatures", "head_prob ECE", "mean head_prob", "head accuracy", "dep_prob ECE", "mean dep_prob",
    "label accuracy (right arcs)", "error sentences in the least confident 20%",
)  # fmt: skip


def calibration_row(report: Dict, split: str, when: str) -> List[str]:
    values = report[f"{split}_{when}"]
    recall = values["sentence_error_recall_at_20pct"]
    temperatures = "1, 1" if when == "before" else f"{report['arc_temperature']:.2f}, {report['label_temperature']:.2f}"
    return [
        split, temperatures, f"{values['head_prob_ece']:.4f}", f"{100 * values['mean_head_prob']:.1f}",
        f"{100 * values['head_accuracy']:.1f}", f"{values['dep_prob_ece']:.4f}", f"{100 * values['mean_dep_prob']:.1f}",
        f"{100 * values['label_accuracy_on_right_arcs']:.1f}",
        f"{100 * recall['recall']:.1f}% of {recall['n_with_error']:,} (at most {100 * recall['best_possible']:.1f}%)",
    ]  # fmt: skip


def calibration_block(results: Results) -> str:
    """ECE and error recall on dev and test, before and after the temperatures fitted on dev (`calibrate`)."""
    report = results.json("results/calibration.json")
    if report is None:
        return ""
    rows = [calibration_row(report, split, when) for split in ("dev", "test") for when in ("before", "after")]
    return (
        table(CALIBRATION_COLUMNS, rows)
        + f"\n\nModel: `{report['model']}`; {report['n_bins']} equal-width bins; temperatures: arcs, labels.\n\n"
    )


CONFIDENCE_RATIOS = {
    "none": "ratio_b_confidence_none_over_a",
    "arcs (default)": "ratio_b_over_a",
    "matrix": "ratio_b_confidence_matrix_over_a",
}


def confidence_cost_block(results: Results) -> str:
    """Words/s relative to the transformer alone (b/a) with each `confidence` setting, one interleaved run."""
    inference = (results.json("results/bench_speed.json") or {}).get("inference", {})
    if CONFIDENCE_RATIOS["none"] not in inference:
        return "Not measured yet with the confidence settings.\n\n"
    return (
        table(("confidence", "b/a"), [(name, f"{inference[key]:.3f}") for name, key in CONFIDENCE_RATIOS.items()])
        + "\n\n"
    )


OBJECTIVE_FILES = (
    ("local", "results/pairatt_dev.json", "parser"),
    ("tree_crf", "results/pairatt_treecrf_dev.json", "parser"),
)


def arc_objectives_block(results: Results) -> str:
    """Dev UAS/LAS (no punctuation) of the two arc objectives trained on the same config, budget and seed."""
    found = [(name, results.json(path)) for name, path, _ in OBJECTIVE_FILES]
    if any(result is None for _, result in found):
        return ""
    rows = [(name, *(f"{100 * result['scores'][key]:.2f}" for key in ("dep_uas", "dep_las"))) for name, result in found]
    return table(("arc_objective", "dev UAS", "dev LAS"), rows) + "\n\n"


ENCODERS_FILE = "results/encoders.json"


def encoder_sources(results: Results) -> Sources:
    """encoders.json and the files behind every row that has run (speed files are bench results)."""
    rows = (results.json(ENCODERS_FILE) or {}).get("rows", [])
    found = [
        (path, "bench" if what == "speed" else "parser")
        for row in rows
        for what, path in row["files"].items()
        if path not in row["missing"]
    ]
    return [(ENCODERS_FILE, "parser"), *found]


def encoders_block(results: Results) -> str:
    from spacy_pairatt.study.encoders_table import encoders_markdown

    found = results.json(ENCODERS_FILE)
    if found is None:
        return ""
    speed = [(path, kind) for path, kind in encoder_sources(results) if kind == "bench"]
    return encoders_markdown(found) + "\n\n" + speed_days_note(results, speed)


# The `all` workflow's trainings, in the order it runs them: (what it trains, results file, result kind).
ALL_WORKFLOW_TRAININGS = (
    ("pairatt_parser", "results/train_pairatt_cost.json", "parser"),
    ("spaCy's transition parser", "results/train_transition_cost.json", "transition"),
    ("the UD pipeline (stage 1)", "results/train_ud_pipeline_cost.json", "ud_pipeline"),
    ("its senter (stage 2)", "results/train_ud_pipeline_senter_cost.json", "ud_pipeline"),
)
REQUIREMENTS_FILES = (("results/footprint.json", "footprint"), *paths(ALL_WORKFLOW_TRAININGS))


def requirements_block(results: Results) -> str:
    """Disk (results/footprint.json) and the wall time and peak RSS of the `all` workflow's trainings, so that a
    user can tell whether the machine fits."""
    lines = []
    footprint = results.json("results/footprint.json")
    if footprint is not None:
        folders = footprint["folder_bytes"]
        model, data = folders.get("training/pairatt/model-best"), folders.get("assets", 0) + folders.get("corpus", 0)
        lines.append(
            f"- Disk: {footprint['stack_bytes'] / 1e9:.1f} GB for the installed Python stack with torch's CPU build"
            + (f", {model / 1e6:,.0f} MB per trained pipeline (the workflow keeps several)" if model else "")
            + (f" and {data / 1e6:,.0f} MB of data and corpora" if data else "")
            + "."
        )
    measured = [(what, results.json(path)) for what, path, _ in ALL_WORKFLOW_TRAININGS if results.json(path)]
    if measured:
        each = "; ".join(
            f"{what} {cost['wall_seconds'] / 60:.0f} min, {cost['peak_rss_mb'] / 1000:.1f} GB"
            for what, cost in measured
        )
        total = sum(cost["wall_seconds"] for _, cost in measured) / 60
        cores = {cost["provenance"].get("cores") for _, cost in measured} - {None}
        where = f"{cores.pop()} CPU cores" if len(cores) == 1 else "CPU"
        lines.append(
            f"- Time and memory on {where}, the `all` workflow's trainings (wall time, peak RSS): {each}; "
            f"{total:.0f} min in all, before evaluation, the small CNN senter and packaging. A machine with less "
            f"memory than the largest of these swaps or stops there."
        )
    return "\n".join(lines) + "\n\n" if lines else ""
