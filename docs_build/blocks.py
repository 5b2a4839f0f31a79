"""The renderers of plan.json's blocks and their prose (templates/*.md): each turns results files into markdown
that ends in a blank line, or "" where its files are not there yet. Figures are rounded once, when printed."""

import json
import re
import shlex
from functools import cached_property
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path
from string import Formatter
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from spacy_pairatt.evaluation.ud_eval import METRICS, f1_percent
from spacy_pairatt.reports import percent, relations_table, results_table, tokenizer_tables

from .results import MissingFigure, Results, Sources, speed_days_note


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
        except MissingFigure:  # it names the results file
            raise
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


def bench_module(results: Results, name: str = "table"):
    """bench/{name}.py of the checkout (the renderer of its results/*.md), or None outside one."""
    path = results.root / "bench" / f"{name}.py"
    if not path.exists():
        return None
    spec = spec_from_file_location(f"pairatt_bench_{name}", path)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def evaluation_table(results: Results, block) -> str:
    """`evaluate` results, a row each (name, split, file): those that are there, and whether their speeds compare."""
    rows = [{"name": n, "split": s, "result": results.json(p)} for n, s, p, _ in block.files["rows"] if results.json(p)]
    return (results_table(rows) + "\n" if rows else "") + speed_days_note(results, block.sources(results))


def tokenizer_block(results: Results, block) -> str:
    return tokenizer_tables(block.json(results, "tokenizer")) + "\n"


def relations_block(results: Results, block) -> str:
    """SemEval and Re-DocRED tables, and what attention features add, in points from exact scores."""
    rows = [("pairatt_rel", found) for path, _ in block.files["rows"] if (found := results.json(path)) is not None]
    gaps = []
    for label, metric, *pair in block["gaps"]:  # (with attention, without)
        scores = [(results.json(path) or {}).get("scores", {}).get(metric) for path in pair]
        if None not in scores:
            gaps.append(f"{label} {100 * (scores[0] - scores[1]):+.1f}")
    text = relations_table(rows) + "\n" if rows else ""
    return text + (PROSE("feature-gaps", gaps="; ".join(gaps)) + "\n\n" if gaps else "")


def bench_sections(results: Results, block) -> str:
    """Sections of results/bench.md, one heading level down: for each (function of bench/table.py, results file)
    whose file is there, what the function writes of it."""
    bench, found = bench_module(results), [(name, results.json(path)) for name, path, _ in block.files["sections"]]
    sections = (getattr(bench, name)(data) for name, data in found if data and bench)
    return paragraphs(*("\n".join("#" + line if line.startswith("## ") else line for line in s) for s in sections))


def training_cost_block(results: Results, block) -> str:
    """Steps, wall and CPU time and peak RSS of training each parser `compare` trains, and the bar on the first."""
    runs = [run for what, path, _ in block.files["rows"] if (run := training_cost(results, path, what=what))]
    pairatt, bar, rss = results.json(block.path("rows")), block["peak_rss_bar_mb"], ""
    if pairatt is not None:
        commands = "; ".join(f"`{run['command']}`" for run in runs)
        rss = PROSE("training-rss", bar=bar, run=pairatt, met=verdict(pairatt["peak_rss_mb"] <= bar), commands=commands)
    return paragraphs(PROSE.table("training-cost", runs), rss)


def gpu_block(results: Results, block) -> str:
    """`bench-gpu` on a lent GPU: an 800-step training, its EWT test scores and bench/speed.py; each part is
    left out where its file is missing (the source note says "not measured yet")."""
    cost, test, speed = (block.json(results, role) for role in ("training", "test", "speed"))
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


def sweep_setting(root, path: str, keys: str):
    """A setting a sweep recorded, in the config as it is now: sweeps made before the model's pair scorer was
    renamed (`model.scorer` to `model.pair_scorer`) name it by the old key."""
    try:
        return config_value(root, path, keys)
    except KeyError:
        return config_value(root, path, keys.replace(".model.scorer.", ".model.pair_scorer."))


def width_sweep_block(results: Results, block) -> str:
    """bench/sweep.py over the scorer's widths: EWT dev at every evaluation, and each narrower pair against
    the config's own."""
    record, sweep = block.json(results, "sweep"), bench_module(results, "sweep")
    if sweep is None:
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


def ablation_files(results: Results, block) -> Sources:
    """(path, result kind) of the files matching the block's pattern in each of its folders under results/."""
    return [
        (str(path.relative_to(results.root)), "transition" if path.name.startswith("transition") else "parser")
        for folder in block["folders"].values()
        for path in sorted((results.root / "results" / folder).glob(block["pattern"]))
    ]


def ablation_block(results: Results, block) -> str:
    """Table 1 on both datasets, the orderings and the spread over seeds."""
    from spacy_pairatt.study.ablation import DATASETS
    from spacy_pairatt.study.ablation_table import dataset_markdown, seed_spread_markdown, verdict_text

    found, parts, names = block.json(results, "table"), [], [dataset.key for dataset in DATASETS]
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


def ablation_learning_rate_block(results: Results, block) -> str:
    """The feature-based rows at the fine-tuned rows' learning rate, the reason for theirs."""
    uas = [results.json(path)["scores"]["dep_uas"] for path, _ in block.files["rows"]]
    return PROSE("ablation-lr", uas=uas, folder=block["folder"]) + "\n\n"


def ablation_cost_block(results: Results, block) -> str:
    """What the Table 1 trainings took, summed from each row's training record."""
    parts, total = [], 0
    for name, folder in block["folders"].items():
        paths = [path for path, _ in ablation_files(results, {"folders": {name: folder}, "pattern": block["pattern"]})]
        rows = {path.rsplit("/", 1)[-1][: -len("_train.json")]: results.json(path)["seconds"] for path in paths}
        if rows:
            fine_tuned = ", ".join(f"{key} {value:,.0f} s" for key, value in rows.items() if key.startswith("ft_"))
            seconds, transition = sum(rows.values()), rows.get("transition", 0)
            parts.append(
                PROSE("ablation-cost-dataset", name=name, seconds=seconds, ft=fine_tuned, transition=transition)
            )
            total += seconds
    return PROSE("ablation-cost", datasets=" and ".join(parts), hours=total / 3600) + "\n\n" if parts else ""


def probe_block(results: Results, block) -> str:
    """The probe's UAS and importance summary."""
    probe = block.json(results, "probe")
    both = probe["probes"]["both"]["importance"]
    top = both["top_attention"][0] if both["top_attention"] else None
    uas = ", ".join(f"{name} {percent(p['uas'])}" for name, p in probe["probes"].items())
    first = PROSE("probe-first", top=top) if top else "."
    return PROSE("probe", data=probe["data"], uas=uas, both=both, first=first) + "\n\n"


def calibration_block(results: Results, block) -> str:
    """ECE and error recall on dev and test, before and after the temperatures fitted on dev (`calibrate`)."""
    report = block.json(results, "report")
    fitted = f"{report['arc_temperature']:.2f}, {report['label_temperature']:.2f}"
    rows = [
        {**report[f"{split}_{when}"], **report[f"{split}_{when}"]["sentence_error_recall_at_20pct"], "split": split,
         "temperatures": temperatures}
        for split in ("dev", "test")
        for when, temperatures in (("before", "1, 1"), ("after", fitted))
    ]  # fmt: skip
    return paragraphs(PROSE.table("calibration", rows), PROSE("calibration-model", report=report))


def confidence_cost_block(results: Results, block) -> str:
    """Words/s relative to the transformer alone (b/a) with each `confidence` setting, one interleaved run."""
    inference = (block.json(results, "speed") or {}).get("inference", {})
    measured = "ratio_b_confidence_none_over_a" in inference
    return paragraphs(PROSE("confidence", **inference) if measured else PROSE("confidence-not-measured"))


def arc_objectives_block(results: Results, block) -> str:
    """Dev UAS/LAS (no punctuation) of the two arc objectives trained on the same config, budget and seed."""
    found = [{"name": name, "result": results.json(path)} for name, path, _ in block.files["rows"]]
    return paragraphs(PROSE.table("arc-objectives", found))


def encoder_sources(results: Results, block) -> Sources:
    """encoders.json and the files behind every row that has run (speed files are bench results)."""
    rows = (block.json(results, "table") or {}).get("rows", [])
    found = [
        (path, "bench" if what == "speed" else "parser")
        for row in rows
        for what, path in row["files"].items()
        if path not in row["missing"]
    ]
    return [(block.path("table"), "parser"), *found]


def encoders_block(results: Results, block) -> str:
    from spacy_pairatt.study.encoders_table import encoders_markdown

    found = block.json(results, "table")
    speed = [(path, kind) for path, kind in encoder_sources(results, block) if kind == "bench"]
    return encoders_markdown(found) + "\n\n" + speed_days_note(results, speed)


def requirements_block(results: Results, block) -> str:
    """Disk (results/footprint.json) and the wall time and peak RSS of the `all` workflow's trainings, so that a
    user can tell whether the machine fits."""
    lines, footprint = [], block.json(results, "footprint")
    if footprint is not None:
        folders = footprint["folder_bytes"]
        model, data = folders.get("training/pairatt/model-best"), folders.get("assets", 0) + folders.get("corpus", 0)
        model = PROSE("disk-model", bytes=model) if model else ""
        data = PROSE("disk-data", bytes=data) if data else ""
        lines.append(PROSE("disk", footprint=footprint, model=model, data=data))
    measured = [(what, cost) for what, path, _ in block.files["trainings"] if (cost := results.json(path))]
    if measured:
        each = "; ".join(
            PROSE("time-training", what=what, minutes=cost["wall_seconds"] / 60, cost=cost) for what, cost in measured
        )
        cores = {cost["provenance"].get("cores") for _, cost in measured} - {None}
        where = f"{cores.pop()} CPU cores" if len(cores) == 1 else "CPU"
        minutes = sum(cost["wall_seconds"] for _, cost in measured) / 60
        lines.append(PROSE("time", where=where, each=each, minutes=minutes))
    return "\n".join(lines) + "\n\n" if lines else ""


UD_PROSE = Prose("ud_blocks.md")  # the UD pipeline's blocks (docs/ud_pipeline.md)
# The targets: UPOS and Lemmas F1 (EWT test, gold tokens), sentence F (EWT dev Docs of 10 sentences), and the
# parser's LAS in the pipeline minus alone (EWT test, gold tokens and sentences).
UPOS_BAR, LEMMAS_BAR, SENTENCE_F_BAR, LAS_CHANGE_BAR = 96.0, 96.5, 85.0, -0.3
TOKENIZER_EFFECT_METRICS = ("Tokens", "Words", "Sentences", "UPOS", "Lemmas", "UAS", "LAS", "MLAS")


def against_bar(value: float, bar: float) -> str:
    """How a figure stands to one of the UD pipeline's targets, in words."""
    return f"{'at or above' if value >= bar else 'below'} the target of {bar:g}"


def ud_pipeline_block(results: Results, block) -> str:
    """The UD pipeline's CoNLL 2018 scores beside published ones, its targets, speed and training cost."""
    rows = [
        (system, data, {metric: f1_percent(result, metric) for metric in result["metrics"]})
        for system, data, path, _ in block.files["scores"]
        if (result := results.json(path)) is not None
    ]
    published = (results.json(block["published"]) or {}).get("rows", [])
    rows += [(f"{row['system']}, {row['input']}", row["data"], row["scores"]) for row in published]
    cells = [(system, data, *(f"{s[m]:.2f}" if m in s else "–" for m in METRICS)) for system, data, s in rows]
    cited = {}  # source -> where it was read, each once, in row order
    for row in published:
        cited.setdefault(row["source"], []).append(row["read_in"])
    sources = "; ".join(f"{source} (read in {', '.join(dict.fromkeys(read))})" for source, read in cited.items())
    return paragraphs(
        table(("system", "data", *METRICS), cells),
        UD_PROSE.table("targets", ud_pipeline_targets(results, block)),
        UD_PROSE(
            "speed-and-training", speed=ud_pipeline_speed(results, block), training=ud_pipeline_training(results, block)
        ),
        sources and UD_PROSE("published", path=block["published"], sources=sources),
    )


def ud_pipeline_targets(results: Results, block) -> List[Dict]:
    """Each target's row, from exact scores, or 'not measured yet' where a file behind it is missing."""
    pipeline, alone, docs, _ = (results.json(path) for _, path, _ in block.files["targets"])
    test_gold = results.json(block.files["scores"][3][2])  # EWT test, gold tokens
    # Each figure is None where a file behind it is missing.
    f1 = {metric: test_gold and f1_percent(test_gold, metric) for metric in ("UPOS", "Lemmas")}
    las_change = pipeline and alone and 100 * pipeline["scores"]["dep_las"] - 100 * alone["scores"]["dep_las"]
    figures = (
        ("UPOS, EWT test, gold tokens", f1["UPOS"], UPOS_BAR, "{:.2f}"),
        ("Lemmas, EWT test, gold tokens", f1["Lemmas"], LEMMAS_BAR, "{:.2f}"),
        (
            "sentence F, EWT dev Docs of 10 sentences",
            docs and 100 * docs["scores"]["sents_f"],
            SENTENCE_F_BAR,
            "{:.2f}",
        ),
        ("parser LAS, EWT test, pipeline minus parser alone", las_change, LAS_CHANGE_BAR, "{:+.2f}"),
    )
    return [
        {"name": name, "bar": fmt.format(bar), "value": "–" if value is None else fmt.format(value),
         "verdict": "not measured yet" if value is None else verdict(value >= bar)}
        for name, value, bar, fmt in figures
    ]  # fmt: skip


def ud_pipeline_speed(results: Results, block) -> str:
    """The pipeline's words/s over those of its transformer and parser alone."""
    pipeline, parser_only = (results.json(block.files["targets"][i][1]) for i in (0, 3))
    if pipeline is None or parser_only is None:
        return "not measured yet"
    speeds = pipeline["words_per_second"], parser_only["words_per_second"]
    return UD_PROSE("speed", ratio=speeds[0] / speeds[1], pipeline=speeds[0], alone=speeds[1])


def ud_pipeline_training(results: Results, block) -> str:
    """Steps, wall time and peak RSS of each stage of the pipeline's training beside the parser alone's."""
    trainings = block.files["trainings"]
    if any(results.json(path) is None for _, path, _ in trainings):
        return "not measured yet"
    return "; ".join(UD_PROSE("training", run=training_cost(results, path, what=what)) for what, path, _ in trainings)


def cell(text: str) -> str:
    """A word in a markdown table cell: its pipes escaped."""
    return f"`{text.replace('|', chr(92) + '|')}`"


def ud_errors_block(results: Results, block, shown: int = 10) -> str:
    """Where the pipeline's lemmas and sentences go wrong on EWT dev from raw text (`ud-eval --errors`)."""
    errors = (block.json(results, "errors") or {}).get("errors")
    if errors is None:
        return paragraphs(UD_PROSE("errors-not-measured", path=block.path("errors")))
    lemmas, bounds = errors["lemmas"], errors["sentence_boundaries"]
    kinds = ", ".join(
        f"{kind.replace('_', ' ')} {count:,} ({100 * count / max(lemmas['wrong'], 1):.0f}%)"
        for kind, count in lemmas["kinds"].items()
    )
    commonest = [
        {**c, **{key: cell(c[key]) for key in ("form", "gold", "system")}} for c in lemmas["commonest"][:shown]
    ]
    boundaries = [
        {**bounds[kind], "kind": kind, "commonest": ", ".join(
            f"{cell(c['before'])} {cell(c['after'])} ({c['count']})" for c in bounds[kind]["commonest"][:5])}
        for kind in ("missed", "false")
    ]  # fmt: skip
    return paragraphs(
        UD_PROSE("lemma-errors", lemmas=lemmas, kinds=kinds),
        UD_PROSE.table("lemma-errors-table", commonest),
        UD_PROSE("boundary-errors", bounds=bounds),
        UD_PROSE.table("boundary-errors-table", boundaries),
    )


def tokenizer_effect_block(results: Results, block) -> str:
    """The trained pipeline on EWT dev raw text with its own tokenizer and with spaCy's: what the rules give."""
    found = [(name, results.json(path)) for name, path, _ in block.files["rows"]]
    rows = [
        (name, *("–" if result is None else f"{f1_percent(result, m):.2f}" for m in TOKENIZER_EFFECT_METRICS))
        for name, result in found
    ]
    (_, ours), (_, stock) = found
    if ours is not None and stock is not None:
        differences = (f"{f1_percent(ours, m) - f1_percent(stock, m):+.2f}" for m in TOKENIZER_EFFECT_METRICS)
        rows.append(("UD English minus spaCy English", *differences))
    return table(("tokenizer", *TOKENIZER_EFFECT_METRICS), rows) + "\n\n"
