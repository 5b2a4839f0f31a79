"""Known limits (templates/limits.md) as README, docs/parser.md and the model card state them, with their
measured figures (templates/limit_figures.md), for en_pairatt (`ud_pipeline`) or the parser alone; and the
end of each shipped pipeline's model card (`python -m docs_build --model-card --tier`, for `assemble --notes`).
A figure comes from the files its tier names for its role: a tier without the role (en_pairatt_trf has no
bench or attention curve of its own) states the limit without the figure, or, where the limit is only the
figure, not at all."""

import ast
import re
from pathlib import Path
from typing import List, Optional

from pairatt_paper.attention_curve_table import sentences
from spacy_pairatt.reporting.tables import (
    HEAP_SPEED_BAR,
    heap_growth_targets,
    heap_growth_within_bars,
    heap_release_setting,
    jemalloc_release_setting,
    timed_apart,
)

from .blocks import LEMMAS_BAR, SENTENCE_F_BAR, Prose, against_bar, comparison_entries
from .plan import BLOCKS, PLAN, Block
from .results import Results

TEMPLATE = Path(__file__).parent / "templates" / "limits.md"
PROSE, MEASURED = Prose("limit_figures.md"), Prose("model_card_measured.md")
FILES = BLOCKS["limits"]  # its results files, by role
# Each shipped pipeline's card (`--tier`): plan.json's entry, and the files of its limits' figures where they are
# not the MiniLM tiers' (FILES).
MODEL_CARDS = {name: Block(name, entry) for name, entry in PLAN["model_card"].items()}
LIMIT_FILES = {name: Block(f"{name} limits", {"files": entry["limits"]}) if "limits" in entry else FILES
               for name, entry in PLAN["model_card"].items()}  # fmt: skip
BENCH_WEIGHTS = {
    frozenset(): "untrained weights",
    frozenset({"pairatt_parser"}): "trained pairatt_parser, initialised transition parser",
    frozenset({"transition"}): "initialised pairatt_parser, trained transition parser",
}


def role_json(block: Block, results: Results, role: str) -> Optional[dict]:
    """The results file of the block's `role`; None where it is missing or the block has no such role."""
    return block.json(results, role) if role in block.files else None


def stale_bench(results: Results, role: str, files: Block = FILES) -> str:
    """ "; stale: measured before ..." when code that changes the benchmark came after the file, else ""."""
    stale = results.made(files.path(role), "bench").stale_since()
    return f"; stale: measured before {stale.what}" if stale else ""


def speed(results: Results, ud_pipeline: bool = True, files: Block = FILES) -> str:
    if "speed" not in files.files:
        return ""
    found = files.json(results, "speed")
    if found is None:
        return PROSE("speed-not-measured")
    weights = BENCH_WEIGHTS.get(frozenset(name for name, path in found["models"].items() if path), "trained pipelines")
    inference, threads = found["inference"], found["machine"].get("torch_threads", "?")
    paired = inference.get("paired_ratios_over_a", {}).get("b_pairatt")  # runs before them have none
    spread = PROSE("speed-spread", lowest=min(paired), highest=max(paired)) if paired else ""
    timed = timed_apart(found)  # (transformer s, parser s, b/a) where the bench timed them apart
    apart = PROSE("speed-apart", seconds=timed[:2], ratio=timed[2]) if timed else ""
    c, stale = 1 / inference["ratio_b_over_c_wordpiece_batched"], stale_bench(results, "speed", files)
    figures = dict(weights=weights, threads=threads, stale=stale, inference=inference, c=c)
    return PROSE("speed", **figures, spread=spread, apart=apart)


def attention_memory(results: Results, ud_pipeline: bool = True, files: Block = FILES) -> str:
    memory = role_json(files, results, "memory")
    return "" if memory is None else PROSE("attention-memory", kept=memory["bytes_kept_per_doc"])


def heap(results: Results, ud_pipeline: bool = True, files: Block = FILES) -> Optional[str]:
    """A long parse's heap with bounded memory (opt-in), as the memory bench measured it: under jemalloc
    where installed, and on glibc's malloc; nothing once glibc's is within the targets."""
    if "memory" not in files.files:
        return None
    memory = files.json(results, "memory")
    if memory is None:
        return PROSE("heap-not-measured")
    sizes, stale = [run["sentences"] for run in memory["runs"]], stale_bench(results, "memory", files)
    growth = PROSE("heap-growth", memory=memory, shortest=min(sizes), longest=max(sizes), stale=stale)
    released = [run for run in memory["runs"] if run.get("heap_release")]
    if heap_growth_within_bars(released, memory["speed_check"]["speed_cost_at_default_interval"]) and not stale:
        return None
    setting, targets = heap_release_setting(memory["heap_release"]), heap_growth_targets()
    glibc = PROSE(
        "heap-released", memory=memory, growth=growth, setting=setting, targets=targets, speed_bar=HEAP_SPEED_BAR
    )
    jemalloc = memory.get("jemalloc")
    if jemalloc is None or stale:
        return glibc[0].upper() + glibc[1:]
    within = heap_growth_within_bars(jemalloc["runs"], jemalloc["speed_check"]["speed_cost"])
    setting, verdict = jemalloc_release_setting(jemalloc), "within" if within else "not within"
    return PROSE(
        "heap-jemalloc", jemalloc=jemalloc, setting=setting, longest=jemalloc["runs"][-1], verdict=verdict, glibc=glibc
    )


def attention_gradient(results: Results, ud_pipeline: bool = True, files: Block = FILES) -> str:
    """What the attention curve measured of the config that carries attention gradients: ft:emb+att - emb+att
    on EWT test, paired by seed, at each size the curve trained it."""
    found = role_json(files, results, "attention-gradient")
    entries = comparison_entries(found["comparisons"], "ftatt", "att") if found else []
    gains = "; ".join(PROSE("gradient-gain", entry=e, sentences=sentences(e["n_train"], e["size"])) for e in entries)
    return PROSE("attention-gradient", gains=gains, most=max(e["n_train"] for e in entries)) if entries else ""


def max_unsegmented_tokens(results: Results, ud_pipeline: bool = True, files: Block = FILES) -> str:
    """pair_batch.MAX_UNSEGMENTED_TOKENS, read from its module's source: the module imports spaCy."""
    source = Path(__file__).parents[3] / "spacy_pairatt" / "layers" / "pair_batch.py"
    found = re.search(r"^MAX_UNSEGMENTED_TOKENS(?:: \w+)? = ([^#\n]+)", source.read_text(encoding="utf8"), re.M)
    if not found:
        raise ValueError(f"no `MAX_UNSEGMENTED_TOKENS = ...` in {source}")
    return f"{ast.literal_eval(found[1].strip()):,}"


def segmenter(results: Results, ud_pipeline: bool = True, files: Block = FILES) -> str:
    """Where raw text's sentences come from, and what their errors cost the parse."""
    pipeline, figures = "ud-pipeline" if ud_pipeline else "parser", ""
    found = [results.json(path) for path, _ in files.files.get(f"segmenter-{pipeline}", [])]  # own, gold
    if found and None not in found:
        own, gold = found
        sentence_f = 100 * own["scores"]["sents_f"]
        bar = against_bar(sentence_f, SENTENCE_F_BAR)
        figures = PROSE(f"segmenter-{pipeline}", own=own["scores"], gold=gold["scores"], sentence_f=sentence_f, bar=bar)
    return PROSE("segmenter", source=PROSE(f"senter-{pipeline}"), figures=figures)


def annotation(results: Results, ud_pipeline: bool = True, files: Block = FILES) -> str:
    """What the shipped pipeline annotates, and its weakest annotation."""
    from spacy_pairatt.evaluation.ud_eval import f1_percent

    if not ud_pipeline:
        return PROSE("annotation-parser")
    scores, lemmas = role_json(files, results, "annotation"), ""
    if scores is not None:
        f1 = f1_percent(scores, "Lemmas")
        lemmas = PROSE("lemmas", f1=f1, bar=against_bar(f1, LEMMAS_BAR))
    return PROSE("annotation-ud-pipeline", lemmas=lemmas)


# The template's `{name}`s: each is what the function of that name writes.
FIGURES = (annotation, segmenter, attention_gradient, speed, attention_memory, max_unsegmented_tokens, heap)


def limits(results: Results, ud_pipeline: bool = True, files: Block = FILES) -> List[str]:
    """ud_pipeline: the limits of en_pairatt (`package`), else of the parser alone (`package-parser`); their
    figures from `files` (another tier's: LIMIT_FILES)."""
    template = re.sub(r"<!--.*?-->\n", "", TEMPLATE.read_text(encoding="utf8"), flags=re.S)
    figures, texts = {write.__name__: write(results, ud_pipeline, files) for write in FIGURES}, []
    for item in (" ".join(item.split()) for item in re.split(r"^- ", template, flags=re.M)[1:]):
        whole = re.fullmatch(r"\{(\w+)\}", item)  # an item that is only a figure is left out where it is empty
        texts.append(figures[whole[1]] if whole else item.format_map(figures))
    return [text for text in texts if text]


def limits_block(results: Results, block=FILES, ud_pipeline: bool = True) -> str:
    """Known limits (README, docs/parser.md and the model card); `block`: the plan's (FILES), or a tier's files."""
    return "\n".join(f"- {text}" for text in limits(results, ud_pipeline, block)) + "\n"


def measured(results: Results, card: Block) -> str:
    """The model card's accuracy (gold tokens, raw text), speed and memory, each where measured."""
    found = ((piece, results.json(path)) for piece, path, _ in card.files["accuracy"])
    lines = [MEASURED(piece, result=result) for piece, result in found if result is not None]
    speed, memory = role_json(card, results, "speed"), role_json(card, results, "memory")
    lines += [MEASURED("speed", inference=speed["inference"])] if speed else []
    if memory:
        jemalloc = MEASURED("memory-jemalloc", jemalloc=memory["jemalloc"]) if "jemalloc" in memory else ""
        lines.append(MEASURED("memory", memory=memory, jemalloc=jemalloc, longest=memory["runs"][-1]))
    return "\n".join(lines) + "\n\n"


def model_card_notes(root: Path = Path("."), tier: str = "ud_pipeline") -> str:
    """The model card's end for a tier of MODEL_CARDS: en_pairatt (`ud_pipeline`, the UD pipeline),
    en_pairatt_parser (`parser`) or en_pairatt_trf (`ud_pipeline_trf`)."""
    results, card = Results(root), MODEL_CARDS[tier]
    notes = TEMPLATE.with_name("model_card.md").read_text(encoding="utf8")
    limits = limits_block(results, LIMIT_FILES[tier], ud_pipeline=card["ud_pipeline"])
    notes = notes.format(measured=card(results), limits=limits, encoder=card["encoder"])
    return notes.rstrip("\n") + "\n"
