"""The figures of the generated blocks, each a `Block`: its renderer turns results files into markdown that
ends in a blank line, or "" where its files are not there yet, with its prose in templates/blocks.md; the
block adds the source note. Figures are rounded once, when printed."""

import json
import re
import shlex
from functools import cached_property
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path
from string import Formatter
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from spacy_pairatt.reports import percent, relations_table, results_table, tokenizer_tables

from .results import Results, Sources, speed_days_note


class Figures(Formatter):
    """`str.format` with a scale as conversion: `!p`, a fraction in points (100 times it), `!k`, `!M` and `!G`
    in thousands, millions and billions (bytes in kB, MB, GB); None prints as "–"."""

    DIVISORS = {"k": 1e3, "M": 1e6, "G": 1e9}

    def convert_field(self, value, conversion):
        if value is None or conversion not in ("p", *self.DIVISORS):
            return super().convert_field(value, conversion)
        return 100 * value if conversion == "p" else value / self.DIVISORS[conversion]

    def format_field(self, value, format_spec: str) -> str:
        return "–" if value is None else super().format_field(value, format_spec)


FIGURES = Figures()


class Prose:
    """The named pieces of a template, templates/FILE, each from a `<!-- name -->` line to the next, with
    `FIGURES` fields. A line break in prose is a space, as markdown reads it, except after a backslash (a hard
    break); a table's lines keep theirs."""

    def __init__(self, file: str):
        self.path = Path(__file__).parent / "templates" / file

    @cached_property
    def pieces(self) -> Dict[str, str]:
        parts = re.split(r"^<!-- ([\w-]+) -->\n", self.path.read_text(encoding="utf8"), flags=re.M)[1:]
        texts = (re.sub(r"(?<![\n\\|])\n(?![\n|])", " ", text.rstrip()).replace("\\\n", "\n") for text in parts[1::2])
        return dict(zip(parts[::2], texts))

    def __call__(self, piece: str, /, **fields) -> str:
        try:
            return FIGURES.format(self.pieces[piece], **fields)
        except (KeyError, IndexError) as missing:  # a results file from an older command, or a hand-edited one
            raise ValueError(f"templates/{self.path.name}, piece {piece!r}: its figures lack {missing}") from None

    def table(self, piece: str, rows: Iterable[Mapping]) -> str:
        """The piece's table (its header, and a last line that formats a row) over `rows`; no blank line after."""
        *header, row = self.pieces[piece].split("\n")
        return "\n".join(header + [FIGURES.format(row, **fields) for fields in rows])


PROSE = Prose("blocks.md")


def table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A markdown table of columns known only from the data (else a table piece of a template), without the
    blank line after it."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows])


def paragraphs(*texts: Optional[str]) -> str:
    """The `texts` that are there (not "" or None) as markdown paragraphs, ending in a blank line ("" if none)."""
    texts = [text for text in texts if text]
    return "\n\n".join(texts) + "\n\n" if texts else ""


def verdict(met: bool) -> str:
    return "met" if met else "**not met**"


def paths(rows: Sequence[Sequence]) -> Sources:
    """(path, kind): the last two fields of each row."""
    return [tuple(row[-2:]) for row in rows]


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


def config_value(root, path: str, keys: str, overrides: Optional[Dict] = None, interpolate: bool = False):
    """A setting (dotted `keys`) of the config at `path` in the checkout `root`, read as spaCy's `load_config`
    does (by confection, which spaCy uses: no spaCy import)."""
    from confection import Config

    config = Config().from_disk(root / path, overrides=overrides or {}, interpolate=interpolate)
    for key in keys.split("."):
        config = config[key]
    return config


def json_value(text: str):
    """A command-line value as JSON where it parses, else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def training_cost(results: Results, path: str, **fields) -> Optional[Dict]:
    """A run_cost file (bench/run_cost.py) and `fields`, with the steps of the `spacy train CONFIG [--section.key
    value ...]` it ran (its config as it is now, with the command's overrides), its minutes and seconds a step."""
    cost = results.json(path)
    if cost is None:
        return None
    args = shlex.split(cost["command"])
    overrides = {name[2:]: json_value(v) for name, v in zip(args, args[1:]) if name.startswith("--") and "." in name}
    steps = int(config_value(results.root, args[args.index("train") + 1], "training.max_steps", overrides, True))
    minutes, per_step = cost["wall_seconds"] / 60, cost["wall_seconds"] / steps
    return {**cost, **fields, "steps": steps, "minutes": minutes, "per_step": per_step}


def sweep_setting(root, path: str, keys: str):
    """A setting a sweep recorded, in the config as it is now: sweeps made before the model's pair scorer was
    renamed (`model.scorer` to `model.pair_scorer`) name it by the old key."""
    try:
        return config_value(root, path, keys)
    except KeyError:
        return config_value(root, path, keys.replace(".model.scorer.", ".model.pair_scorer."))


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


TOKENIZER_FILE = "results/tokenizer_ewt.json"


def tokenizer_block(results: Results) -> str:
    result = results.json(TOKENIZER_FILE)
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
    return text + (PROSE("feature-gaps", gaps="; ".join(measured)) + "\n\n" if measured else "")


BENCH_FILES = (("results/bench_speed.json", "bench"), ("results/bench_memory.json", "bench"))
RELATIONS_MEMORY_FILE = "results/bench_relations_memory.json"


def bench_sections(*sections: Tuple[str, str]):
    """The renderer of sections of results/bench.md: for each (results file, function of bench/table.py) whose
    file is there, what the function writes of it, one heading level down."""

    def render(results: Results) -> str:
        bench, found = bench_module(results), [(results.json(path), name) for path, name in sections]
        return paragraphs(*(subsection(getattr(bench, name)(data)) for data, name in found if data and bench))

    return render


bench_block = bench_sections((BENCH_FILES[0][0], "speed_lines"), (BENCH_FILES[1][0], "memory_lines"))
relations_memory_block = bench_sections((RELATIONS_MEMORY_FILE, "relations_memory_lines"))


# `compare`'s two trainings, and the bar on the first: peak RSS of the default config's training.
TRAINING_COST_FILES = (
    ("pairatt_parser (`configs/parser_minilm.cfg`)", "results/train_pairatt_cost.json", "parser"),
    ("transition parser (`configs/transition_minilm.cfg`)", "results/train_transition_cost.json", "transition"),
)
TRAINING_PEAK_RSS_BAR_MB = 4096


def training_cost_block(results: Results) -> str:
    """Steps, wall and CPU time and peak RSS of training each parser `compare` trains."""
    runs = [training_cost(results, path, what=what) for what, path, _ in TRAINING_COST_FILES]
    runs = [run for run in runs if run is not None]
    pairatt, rss = results.json(TRAINING_COST_FILES[0][1]), ""
    if pairatt is not None:
        met = verdict(pairatt["peak_rss_mb"] <= TRAINING_PEAK_RSS_BAR_MB)
        commands = "; ".join(f"`{run['command']}`" for run in runs)
        rss = PROSE("training-rss", bar=TRAINING_PEAK_RSS_BAR_MB, run=pairatt, met=met, commands=commands)
    return paragraphs(PROSE.table("training-cost", runs), rss)


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
    training, bench = "", bench_module(results)
    if cost is not None:
        steps = (test or {}).get("model_config", {}).get("max_steps")  # patience = 0: no early stop
        per_step = (f"{steps} steps in ", f", {cost['wall_seconds'] / steps:.2f} s/step") if steps else ("", "")
        training = PROSE("gpu-training", cost=cost, steps=per_step[0], per_step=per_step[1])
    lines = []
    if speed is not None and bench is not None:
        lines = bench.speed_lines(speed)  # without its heading and the cProfile stages (misleading on a GPU)
        lines = lines[2 : next(i for i, line in enumerate(lines) if line.startswith("Profile of")) - 1]
        if speed["machine"].get("gpu_peak_allocated_mb") is not None:
            lines += ["", PROSE("gpu-allocated", machine=speed["machine"])]
    return paragraphs(
        speed and PROSE("gpu-device", gpu=speed["machine"]["gpu"] or "no GPU", run=speed["provenance"]),
        training,
        test and PROSE("gpu-test", scores=test["scores"], seed=test["model_config"]["seed"]),
        "\n".join(lines),
        lines and PROSE("gpu-bench", run=speed["provenance"]),
    )


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
        lines.append("\n" + PROSE("width-against", names=names, value=value, own=own, uas=uas, las=las))
    commands = "; ".join(f"`{command}`" for command in record["commands"].values())
    return "\n".join(lines + ["\n" + PROSE("width-device", record=record, commands=commands)]) + "\n\n"


def ablation_files(results: Results, folders: Sequence[str], pattern: str) -> List:
    """(path, result kind) of the files matching `pattern` in results/`folder` for each folder."""
    return [
        (str(path.relative_to(results.root)), "transition" if path.name.startswith("transition") else "parser")
        for folder in folders
        for path in sorted((results.root / "results" / folder).glob(pattern))
    ]


def ablation_sources(results: Results) -> Sources:
    """Each ablation row's test scores (the files the table is made of), in every results folder."""
    return ablation_files(results, ("ablation", "ablation_seed1", "ablation_seed2"), "*/*_test.json")


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
    parts.append(PROSE("orderings") + "\n")
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
    uas = [(results.json(path) or {}).get("scores", {}).get("dep_uas") for path, _ in LR_FILES]
    return "" if None in uas else PROSE("ablation-lr", uas=uas, folder=LR_FOLDER) + "\n\n"


ABLATION_TRAININGS = {"EWT": "ablation/ewt", "PTB": "ablation/ptb"}


def ablation_training_sources(results: Results) -> Sources:
    return ablation_files(results, list(ABLATION_TRAININGS.values()), "*_train.json")


def ablation_cost_block(results: Results) -> str:
    """What the Table 1 trainings took, summed from each row's training record."""
    parts, total = [], 0
    for name, folder in ABLATION_TRAININGS.items():
        rows = {
            path.rsplit("/", 1)[-1][: -len("_train.json")]: results.json(path)["seconds"]
            for path, _ in ablation_files(results, [folder], "*_train.json")
        }
        if rows:
            fine_tuned = ", ".join(f"{key} {value:,.0f} s" for key, value in rows.items() if key.startswith("ft_"))
            seconds = sum(rows.values())
            transition = rows.get("transition", 0)
            parts.append(
                PROSE("ablation-cost-dataset", name=name, seconds=seconds, ft=fine_tuned, transition=transition)
            )
            total += seconds
    return PROSE("ablation-cost", datasets=" and ".join(parts), hours=total / 3600) + "\n\n" if parts else ""


PROBE_FILE = "results/probe.json"


def probe_block(results: Results) -> str:
    """The probe's UAS and importance summary."""
    probe = results.json(PROBE_FILE)
    if probe is None:
        return ""
    both = probe["probes"]["both"]["importance"]
    top = both["top_attention"][0] if both["top_attention"] else None
    uas = ", ".join(f"{name} {percent(p['uas'])}" for name, p in probe["probes"].items())
    first = PROSE("probe-first", top=top) if top else "."
    return PROSE("probe", data=probe["data"], uas=uas, both=both, first=first) + "\n\n"


CALIBRATION_FILE = "results/calibration.json"


def calibration_block(results: Results) -> str:
    """ECE and error recall on dev and test, before and after the temperatures fitted on dev (`calibrate`)."""
    report = results.json(CALIBRATION_FILE)
    if report is None:
        return ""
    fitted = f"{report['arc_temperature']:.2f}, {report['label_temperature']:.2f}"
    rows = []
    for split in ("dev", "test"):
        for when, temperatures in (("before", "1, 1"), ("after", fitted)):
            values = report[f"{split}_{when}"]
            recall = values["sentence_error_recall_at_20pct"]
            rows.append({**values, **recall, "split": split, "temperatures": temperatures})
    return paragraphs(PROSE.table("calibration", rows), PROSE("calibration-model", report=report))


def confidence_cost_block(results: Results) -> str:
    """Words/s relative to the transformer alone (b/a) with each `confidence` setting, one interleaved run."""
    inference = (results.json(BENCH_FILES[0][0]) or {}).get("inference", {})
    measured = "ratio_b_confidence_none_over_a" in inference
    return paragraphs(PROSE("confidence", **inference) if measured else PROSE("confidence-not-measured"))


OBJECTIVE_FILES = (
    ("local", "results/pairatt_dev.json", "parser"),
    ("tree_crf", "results/pairatt_treecrf_dev.json", "parser"),
)


def arc_objectives_block(results: Results) -> str:
    """Dev UAS/LAS (no punctuation) of the two arc objectives trained on the same config, budget and seed."""
    found = [{"name": name, "result": results.json(path)} for name, path, _ in OBJECTIVE_FILES]
    if any(row["result"] is None for row in found):
        return ""
    return paragraphs(PROSE.table("arc-objectives", found))


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
    footprint = results.json(REQUIREMENTS_FILES[0][0])
    if footprint is not None:
        folders = footprint["folder_bytes"]
        model, data = folders.get("training/pairatt/model-best"), folders.get("assets", 0) + folders.get("corpus", 0)
        model = PROSE("disk-model", bytes=model) if model else ""
        data = PROSE("disk-data", bytes=data) if data else ""
        lines.append(PROSE("disk", footprint=footprint, model=model, data=data))
    measured = [(what, cost) for what, path, _ in ALL_WORKFLOW_TRAININGS if (cost := results.json(path))]
    if measured:
        each = "; ".join(
            PROSE("time-training", what=what, minutes=cost["wall_seconds"] / 60, cost=cost) for what, cost in measured
        )
        cores = {cost["provenance"].get("cores") for _, cost in measured} - {None}
        where = f"{cores.pop()} CPU cores" if len(cores) == 1 else "CPU"
        minutes = sum(cost["wall_seconds"] for _, cost in measured) / 60
        lines.append(PROSE("time", where=where, each=each, minutes=minutes))
    return "\n".join(lines) + "\n\n" if lines else ""
