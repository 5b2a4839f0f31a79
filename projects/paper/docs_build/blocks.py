"""The renderers of plan.json's blocks and their prose (templates/*.md): each turns results files into markdown
that ends in a blank line (a block whose `requires` files are missing is not rendered: plan.Block). Figures are
rounded once, when printed."""

import re
import shlex
from functools import cached_property
from pathlib import Path
from string import Formatter
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from spacy_pairatt.evaluation.ud_eval import METRICS, f1_percent
from spacy_pairatt.reporting.tables import results_table

from .plan import BLOCKS
from .results import MissingFigure, Results, Sources, speed_days_note


class Figures(Formatter):
    """`str.format` with a scale as conversion: `!p`, a fraction in points (100 times it), `!k`, `!M` and `!G`
    in thousands, millions and billions (bytes in kB, MB, GB), `!m` and `!h`, seconds in minutes and hours; `!l`,
    a list as "a, b"; None prints as "–"."""

    DIVISORS = {"k": 1e3, "M": 1e6, "G": 1e9, "m": 60, "h": 3600}

    def convert_field(self, value, conversion):
        if conversion == "l":
            return ", ".join(map(str, value))
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


def training_cost(results: Results, path: str, **fields) -> Dict:
    """A run_cost file (scripts/run_cost.py) and `fields`, with the steps it covers and seconds a step: a resumable
    run's recorded `steps` (from, to), else those of the `spacy train CONFIG` it ran (its `--training.max_steps`,
    else its config's as it is now, read by confection as spaCy does: no spaCy import)."""
    from confection import Config

    cost = results.json(path)
    if "steps" in cost:
        first, last = cost["steps"]
        steps = last - first
    else:
        args = shlex.split(cost["command"])
        options = dict(zip(args, args[1:]))
        config = options.get("train") or options["train-resumable"]
        config_steps = Config().from_disk(results.root / config)["training"]["max_steps"]
        steps = int(options.get("--training.max_steps") or config_steps)
    return {**cost, **fields, "steps": steps, "per_step": cost["wall_seconds"] / steps}


def piece_block(results: Results, block) -> str:
    """The template piece the plan names ("piece") over the JSON of each role of the block: one file's, or the
    list of its files' where a role has several."""
    found = {role: [results.json(row[-2]) for row in rows] for role, rows in block.files.items()}
    fields = {role: files[0] if len(files) == 1 else files for role, files in found.items()}
    return paragraphs(PROSE(block["piece"], **fields))


def evaluation_table(results: Results, block) -> str:
    """`evaluate` results, a row each (name, split, file), and whether their speeds compare."""
    rows = [
        {"name": name, "split": split, "result": results.json(path)} for name, split, path, _ in block.files["rows"]
    ]
    return results_table(rows) + "\n" + speed_days_note(results, block.sources(results))


def training_cost_block(results: Results, block) -> str:
    """Steps, wall and CPU time and peak RSS of training each parser `compare` trains, and the bar on the first."""
    runs = [training_cost(results, path, what=what) for what, path, _ in block.files["rows"] if results.json(path)]
    pairatt, bar, rss = results.json(block.path("rows")), block["peak_rss_bar_mb"], ""
    if pairatt is not None:
        commands = "; ".join(f"`{run['command']}`" for run in runs)
        rss = PROSE("training-rss", bar=bar, run=pairatt, met=verdict(pairatt["peak_rss_mb"] <= bar), commands=commands)
    return paragraphs(PROSE.table("training-cost", runs), rss)


def gpu_block(results: Results, block) -> str:
    """`bench-gpu` on a lent GPU: an 800-step training, its EWT test scores and bench/speed.py; each part is
    left out where its file is missing (the source note says "not measured yet")."""
    from bench.table import speed_lines  # the checkout's bench/, beside docs_build/

    cost, test, speed = (block.json(results, role) for role in ("training", "test", "speed"))
    # bench/table.py's speed section, less its heading and cProfile's stages (which mislead on a GPU)
    lines = speed and speed_lines(speed)
    lines = lines and lines[2 : next(i for i, line in enumerate(lines) if line.startswith("Profile of")) - 1]
    if lines and speed["machine"].get("gpu_peak_allocated_mb") is not None:
        lines += ["", PROSE("gpu-allocated", machine=speed["machine"])]
    return paragraphs(
        speed and PROSE("gpu-device", gpu=speed["machine"]["gpu"] or "no GPU", run=speed["provenance"]),
        cost and PROSE("gpu-training", cost=training_cost(results, block.path("training"))),
        test and PROSE("gpu-test", scores=test["scores"], seed=test["model_config"]["seed"]),
        lines and "\n".join(lines),
        lines and PROSE("gpu-bench", run=speed["provenance"]),
    )


def ablation_files(results: Results, block) -> Sources:
    """(path, result kind) of the files matching the block's pattern in each of its folders (from the checkout)."""
    return [
        (str(path.relative_to(results.root)), "transition" if path.name.startswith("transition") else "parser")
        for folder in block["folders"].values()
        for path in sorted((results.root / folder).glob(block["pattern"]))
    ]


def markdown_part(results: Results, block) -> str:
    """The part of the markdown file its command writes (plan: "markdown") from the line that starts with "from"
    to the one before the line that starts with "to" (each optional), its headings one level down: the docs show
    the figures as the command printed them."""
    lines = (results.root / block["markdown"]).read_text(encoding="utf8").splitlines()
    marks = (block.entry.get(key) for key in ("from", "to"))
    start, end = (mark and line_index(lines, mark, block["markdown"]) for mark in marks)  # None: the file's edge
    part = ("#" + line if line.startswith("#") else line for line in lines[start:end])
    return "\n".join(part).strip() + "\n\n"


def line_index(lines: Sequence[str], start: str, path: str) -> int:
    """The index of the first line that starts with `start`."""
    found = [i for i, line in enumerate(lines) if line.startswith(start)]
    if not found:
        raise ValueError(f"{path} has no line {start!r}: re-run the command that makes it")
    return found[0]


def ablation_cost_block(results: Results, block) -> str:
    """What the Table 1 trainings took, summed from each row's training record."""
    parts, total = [], 0
    for name, folder in block["folders"].items():
        paths = ablation_files(results, {"folders": {name: folder}, "pattern": block["pattern"]})
        rows = {path.rsplit("/", 1)[-1][: -len("_train.json")]: results.json(path)["seconds"] for path, _ in paths}
        fine_tuned = ", ".join(f"{key} {value:,.0f} s" for key, value in rows.items() if key.startswith("ft_"))
        parts.append(PROSE("ablation-cost-dataset", name=name, seconds=sum(rows.values()), ft=fine_tuned, rows=rows))
        total += sum(rows.values())
    return PROSE("ablation-cost", datasets=" and ".join(parts), seconds=total) + "\n\n"


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


def encoder_sources(results: Results, block) -> Sources:
    """encoders.json and the files behind every row that has run (speed files are bench results), in either project."""
    rows = (block.json(results, "table") or {}).get("rows", [])
    found = [
        (path if (results.root / path).exists() else f"projects/paper/{path}", "bench" if what == "speed" else "parser")
        for row in rows
        for what, path in row["files"].items()
        if path not in row["missing"]
    ]
    return [(block.path("table"), "parser"), *found]


def disk_text(results: Results, block) -> str:
    """The disk the stack, a trained pipeline and the data take (projects/paper/results/footprint.json)."""
    footprint = block.json(results, "footprint")
    model = footprint["folder_bytes"].get("training/pairatt/model-best")
    data = footprint["folder_bytes"].get("assets", 0) + footprint["folder_bytes"].get("corpus", 0)
    model, data = PROSE("disk-model", bytes=model) if model else "", PROSE("disk-data", bytes=data) if data else ""
    return PROSE("disk", footprint=footprint, model=model, data=data)


def requirements_block(results: Results, block) -> str:
    """Disk and the wall time and peak RSS of the `all` workflow's trainings, so that a user can tell whether
    the machine fits."""
    costs = [(what, results.json(path)) for what, path, _ in block.files["trainings"]]
    cores = {cost["provenance"]["cores"] for _, cost in costs}
    each = "; ".join(PROSE("time-training", what=what, cost=cost) for what, cost in costs)
    where = f"{cores.pop()} CPU cores" if len(cores) == 1 else "CPU"
    return paragraphs(
        disk_text(results, block)
        + "\n"
        + PROSE("time", where=where, each=each, seconds=sum(cost["wall_seconds"] for _, cost in costs))
    )


UD_PROSE = Prose("ud_blocks.md")  # the UD pipeline's blocks (docs/ud_pipeline.md)
# The targets: UPOS and Lemmas F1 (EWT test, gold tokens), sentence F (EWT dev Docs of 10 sentences), and the
# parser's LAS in the pipeline minus alone (EWT test, gold tokens and sentences).
UPOS_BAR, LEMMAS_BAR, SENTENCE_F_BAR, LAS_CHANGE_BAR = 96.0, 96.5, 85.0, -0.3
TOKENIZER_EFFECT_METRICS = ("Tokens", "Words", "Sentences", "UPOS", "Lemmas", "UAS", "LAS", "MLAS")


def tiers_block(results: Results, block) -> str:
    """The shipped UD pipelines side by side (README and both model cards): accuracy from raw text and with gold
    tokens, words/s in both precisions, the memory of a parse, the disk and what training each took, so that a
    user can choose one."""
    bench, gold_tokens = block.json(results, "bench"), {name: path for name, path, _ in block.files["gold_tokens"]}
    rows = [
        {
            "name": name,
            "encoder": encoder,
            "raw": {metric: f1_percent(results.json(raw), metric) for metric in ("Sentences", "UPOS", "Lemmas", "LAS")},
            "gold_las": f1_percent(results.json(gold_tokens[name]), "LAS"),
            "speed": bench["tiers"][name],
        }
        for name, encoder, raw, _ in block.files["raw_text"]
    ]
    native = "yes" if bench["native_bfloat16"] else "no (emulated: slower than float32)"
    trainings = "; ".join(
        UD_PROSE("tier-training", run=training_cost(results, path, what=f"`{name}`"))
        for name, path, _ in block.files["trainings"]
    )
    return paragraphs(
        UD_PROSE.table("tiers", rows), UD_PROSE("tiers-note", bench=bench, native=native, trainings=trainings)
    )


def against_bar(value: float, bar: float) -> str:
    """How a figure stands to one of the UD pipeline's targets, in words."""
    return f"{'at or above' if value >= bar else 'below'} the target of {bar:g}"


def ud_pipeline_block(results: Results, block) -> str:
    """The UD pipeline's CoNLL 2018 scores beside published ones, its targets, speed and training cost."""
    published = results.json(block["published"])["rows"]
    measured = [(system, data, results.json(path)) for system, data, path, _ in block.files["scores"]]
    rows = [(system, data, {m: f1_percent(result, m) for m in result["metrics"]}) for system, data, result in measured]
    rows += [(f"{row['system']}, {row['input']}", row["data"], row["scores"]) for row in published]
    cells = [(system, data, *(f"{s[m]:.2f}" if m in s else "–" for m in METRICS)) for system, data, s in rows]
    cited = {}  # source -> where it was read, each once, in row order
    for row in published:
        cited.setdefault(row["source"], []).append(row["read_in"])
    sources = "; ".join(f"{source} (read in {', '.join(dict.fromkeys(read))})" for source, read in cited.items())
    pipeline, alone, docs, parser_only = (results.json(path) for _, path, _ in block.files["targets"])
    trainings = (
        UD_PROSE("training", run=training_cost(results, path, what=what)) for what, path, _ in block.files["trainings"]
    )
    speeds = pipeline["words_per_second"], parser_only["words_per_second"]
    return paragraphs(
        table(("system", "data", *METRICS), cells),
        UD_PROSE.table("targets", ud_pipeline_targets(measured[3][2], pipeline, alone, docs)),  # EWT test, gold tokens
        UD_PROSE("speed-and-training", ratio=speeds[0] / speeds[1], speeds=speeds, training="; ".join(trainings)),
        UD_PROSE("published", path=block["published"], sources=sources),
    )


def ud_pipeline_targets(test_gold: Dict, pipeline: Dict, alone: Dict, docs: Dict) -> List[Dict]:
    """Each target's row from exact scores: UPOS and Lemmas F1 of EWT test with gold tokens (`test_gold`), sentence
    F of Docs of 10 sentences (`docs`), and the parser's LAS in the pipeline minus alone."""
    figures = (
        ("UPOS, EWT test, gold tokens", f1_percent(test_gold, "UPOS"), UPOS_BAR, ".2f"),
        ("Lemmas, EWT test, gold tokens", f1_percent(test_gold, "Lemmas"), LEMMAS_BAR, ".2f"),
        ("sentence F, EWT dev Docs of 10 sentences", 100 * docs["scores"]["sents_f"], SENTENCE_F_BAR, ".2f"),
        ("parser LAS, EWT test, pipeline minus parser alone",
         100 * pipeline["scores"]["dep_las"] - 100 * alone["scores"]["dep_las"], LAS_CHANGE_BAR, "+.2f"),
    )  # fmt: skip
    return [
        {"name": name, "value": value, "bar": bar, "spec": spec, "verdict": verdict(value >= bar)}
        for name, value, bar, spec in figures
    ]


def cell(text: str) -> str:
    """A word in a markdown table cell: its pipes escaped."""
    return f"`{text.replace('|', chr(92) + '|')}`"


def ud_errors_block(results: Results, block, shown: int = 10) -> str:
    """Where the pipeline's lemmas and sentences go wrong on EWT dev from raw text (`ud-eval --errors`)."""
    errors = block.json(results, "errors")["errors"]
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
    rows = [(name, *(f"{f1_percent(result, m):.2f}" for m in TOKENIZER_EFFECT_METRICS)) for name, result in found]
    (_, ours), (_, stock) = found
    differences = (f"{f1_percent(ours, m) - f1_percent(stock, m):+.2f}" for m in TOKENIZER_EFFECT_METRICS)
    rows.append(("UD English minus spaCy English", *differences))
    return table(("tokenizer", *TOKENIZER_EFFECT_METRICS), rows) + "\n\n"


CURVE_PROSE = Prose("curve_blocks.md")  # the attention curve's summary (README.md)
CURVE_JSON, RUNS_DIR = BLOCKS["attention-curve"].path("table"), BLOCKS["attention-curve"]["runs"]
# The comparisons the summary shows (better, worse): what attention adds, as a feature and fine-tuned through.
ATTENTION_GAINS = (("att", "emb"), ("ftatt", "emb"))
GOAL = 1.0  # the study's target: pooled gain in LAS points, with the interval above 0


def curve_sources(results: Results, block=None) -> Sources:
    """The table and the record of each run in it, with the result kind of its task (parser or relations)."""
    runs = (results.json(CURVE_JSON) or {}).get("runs", [])
    return [(CURVE_JSON, "parser")] + [(f"{RUNS_DIR}/{run['run_id']}.json", run["task"]) for run in runs]


def comparison_entries(entries: Sequence[Dict], better: str, worse: str) -> List[Dict]:
    """The EWT test LAS entries of one comparison (row `better` minus row `worse`), by training size."""
    mine = [e for e in entries if (e["better"], e["worse"], e["domain"], e["metric"]) == (better, worse, "ewt", "las")]
    return sorted(mine, key=lambda e: (e["dataset"], e["n_train"]))


def goal_text(entries: Sequence[Dict]) -> str:
    """Whether the study's target is reached anywhere (only ATTENTION_GAINS count)."""
    reached = [e for pair in ATTENTION_GAINS for e in comparison_entries(entries, *pair) if e.get("at_least_one_point")]
    if reached:
        where = ", ".join(f"{e['comparison']} at {e['n_train']:,} sentences ({e['pooled']:+.2f})" for e in reached)
        return CURVE_PROSE("goal-reached", goal=GOAL, where=where)
    return CURVE_PROSE("goal-not-reached", goal=GOAL)


def attention_curve_summary_block(results: Results, block) -> str:
    """The README's version of projects/paper/results/attention_curve.md: pooled gains and verdicts in one paragraph,
    and the target."""
    entries, gains = results.json(CURVE_JSON)["comparisons"], []
    for pair in ATTENTION_GAINS:
        mine = comparison_entries(entries, *pair)
        sizes = ", ".join(f"{e['n_train']:,} sentences {e['pooled']:+.2f} ({e['verdict']})" for e in mine)
        gains += [f"{mine[0]['comparison']}: {sizes}"] if mine else []
    return paragraphs(CURVE_PROSE("summary", gains="; ".join(gains), goal=goal_text(entries)))
