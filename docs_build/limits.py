"""Known limits (templates/limits.md): the README, docs/parser.md and the model card state the same ones; the
functions here write their measured figures (prose in templates/limit_figures.md), for en_pairatt
(`ud_pipeline`) or the parser alone."""

import ast
import re
from pathlib import Path
from typing import List, Optional

from spacy_pairatt.reports import (
    HEAP_SPEED_BAR,
    heap_growth_targets,
    heap_growth_within_bars,
    heap_release_setting,
    jemalloc_release_setting,
)

from .blocks import Prose
from .curve_blocks import CURVE_JSON, comparison_entries, shown_entries
from .plan import BLOCKS
from .results import Results
from .ud_blocks import LEMMAS_BAR, SENTENCE_F_BAR, against_bar

TEMPLATE = Path(__file__).parent / "templates" / "limits.md"
PROSE = Prose("limit_figures.md")
FILES = BLOCKS["limits"]
SPEED_FILE, MEMORY_FILE = FILES.path("speed"), FILES.path("memory")
# The weights bench/speed.py timed: those of the pipelines it loaded trained.
WEIGHTS = {
    frozenset(): "untrained weights",
    frozenset({"pairatt_parser"}): "trained pairatt_parser, initialised transition parser",
    frozenset({"transition"}): "initialised pairatt_parser, trained transition parser",
}


def stale_bench(results: Results, path: str) -> str:
    """ "; stale: measured before ..." when code that changes the benchmark came after `path`, else ""."""
    stale = results.made(path, "bench").stale_since()
    return f"; stale: measured before {stale.what}" if stale else ""


def speed(results: Results, ud_pipeline: bool = True) -> str:
    found = results.json(SPEED_FILE)
    if found is None:
        return PROSE("speed-not-measured")
    if "models" not in found:
        raise ValueError(
            f"{SPEED_FILE} has no `models` (written before bench/speed.py recorded the pipelines it timed); re-run: "
            "python -m spacy project run bench"
        )
    weights = WEIGHTS.get(frozenset(name for name, path in found["models"].items() if path), "trained pipelines")
    inference, threads = found["inference"], found["machine"].get("torch_threads", "?")
    pairatt_over_transition = 1 / inference["ratio_b_over_c_wordpiece_batched"]
    stale = stale_bench(results, SPEED_FILE)
    return PROSE("speed", weights=weights, threads=threads, stale=stale, inference=inference, c=pairatt_over_transition)


def attention_memory(results: Results, ud_pipeline: bool = True) -> str:
    memory = results.json(MEMORY_FILE)
    return "" if memory is None else PROSE("attention-memory", kept=memory["bytes_kept_per_doc"])


def heap(results: Results, ud_pipeline: bool = True) -> Optional[str]:
    """What the memory benchmark measured of a long parse's heap: under jemalloc, which the command line
    runs under where it is installed, and on glibc's malloc; nothing once glibc's is within the targets."""
    memory = results.json(MEMORY_FILE)
    if memory is None:
        return PROSE("heap-not-measured")
    sizes, stale = [run["sentences"] for run in memory["runs"]], stale_bench(results, MEMORY_FILE)
    growth = PROSE("heap-growth", memory=memory, shortest=min(sizes), longest=max(sizes), stale=stale)
    if "heap_release" not in memory:  # measured before parsing handed free heap back
        return PROSE("heap-unreleased", growth=growth)
    released = [run for run in memory["runs"] if run.get("heap_release")]
    cost = memory["speed_check"]["speed_cost_at_default_interval"]
    if heap_growth_within_bars(released, cost) and not stale:
        return None
    glibc = PROSE(
        "heap-released",
        memory=memory,
        growth=growth,
        setting=heap_release_setting(memory["heap_release"]),
        targets=heap_growth_targets(),
        speed_bar=HEAP_SPEED_BAR,
    )
    jemalloc = memory.get("jemalloc")
    if jemalloc is None or stale:
        return glibc[0].upper() + glibc[1:]
    runs, check = jemalloc["runs"], jemalloc["speed_check"]
    return PROSE(
        "heap-jemalloc",
        jemalloc=jemalloc,
        setting=jemalloc_release_setting(jemalloc),
        shortest=runs[0],
        longest=runs[-1],
        verdict="within" if heap_growth_within_bars(runs, check["speed_cost"]) else "not within",
        glibc=glibc,
    )


def attention_gradient(results: Results, ud_pipeline: bool = True) -> str:
    """What the attention curve measured of the config that carries attention gradients: ft:emb+att - emb+att
    on EWT test, paired by seed, at each size the curve trained it."""
    from spacy_pairatt.study.attention_curve_table import sentences

    found = results.json(CURVE_JSON)
    entries = comparison_entries(shown_entries(found), "ftatt", "att") if found else []
    gains = "; ".join(
        PROSE(
            "gradient-gain",
            entry=e,
            sentences=sentences(e["n_train"], e["size"]),
            seeds=", ".join(map(str, e["seeds"])),
        )
        for e in entries
    )
    return PROSE("attention-gradient", gains=gains, most=max(e["n_train"] for e in entries)) if entries else ""


def max_unsegmented_tokens(results: Results, ud_pipeline: bool = True) -> str:
    return f"{package_constant('MAX_UNSEGMENTED_TOKENS'):,}"


def package_constant(name: str):
    """A module-level constant of spacy_pairatt, read from its source: the module that holds it imports spaCy."""
    import spacy_pairatt

    for path in sorted(Path(spacy_pairatt.__file__).parent.rglob("*.py")):
        found = re.search(rf"^{name}(?:: \w+)? = ([^#\n]+)", path.read_text(encoding="utf8"), flags=re.M)
        if found:
            return ast.literal_eval(found[1].strip())
    raise ValueError(f"no `{name} = ...` in spacy_pairatt")


def segmenter(results: Results, ud_pipeline: bool = True) -> str:
    """Where raw text's sentences come from, and what their errors cost the parse."""
    pipeline = "ud-pipeline" if ud_pipeline else "parser"
    own, gold = (results.json(path) for path, _ in FILES.files[f"segmenter-{pipeline}"])
    figures = ""
    if own is not None and gold is not None:
        sentence_f = 100 * own["scores"]["sents_f"]
        bar = against_bar(sentence_f, SENTENCE_F_BAR)
        figures = PROSE(f"segmenter-{pipeline}", own=own["scores"], gold=gold["scores"], sentence_f=sentence_f, bar=bar)
    return PROSE("segmenter", source=PROSE(f"senter-{pipeline}"), figures=figures)


def annotation(results: Results, ud_pipeline: bool = True) -> str:
    """What the shipped pipeline annotates, and its weakest annotation."""
    if not ud_pipeline:
        return PROSE("annotation-parser")
    from spacy_pairatt.evaluation.ud_eval import f1_percent

    scores = FILES.json(results, "annotation")
    lemmas = ""
    if scores is not None:
        f1 = f1_percent(scores, "Lemmas")
        lemmas = PROSE("lemmas", f1=f1, bar=against_bar(f1, LEMMAS_BAR))
    return PROSE("annotation-ud-pipeline", lemmas=lemmas)


# The template's `{name}`s and the functions that write them.
LIMIT_FIGURES = {
    function.__name__: function
    for function in (annotation, segmenter, attention_gradient, speed, attention_memory, max_unsegmented_tokens, heap)
}


def limits(results: Results, ud_pipeline: bool = True) -> List[str]:
    """ud_pipeline: the limits of en_pairatt (`package`), else of the parser alone (`package-parser`)."""
    template = re.sub(r"<!--.*?-->\n", "", TEMPLATE.read_text(encoding="utf8"), flags=re.S)
    figures = {name: write(results, ud_pipeline) for name, write in LIMIT_FIGURES.items()}
    texts = []
    for item in (" ".join(item.split()) for item in re.split(r"^- ", template, flags=re.M)[1:]):
        whole = re.fullmatch(r"\{(\w+)\}", item)
        texts.append(figures[whole[1]] if whole else item.format_map(figures))
    return [text for text in texts if text]


def limits_block(results: Results, block=FILES, ud_pipeline: bool = True) -> str:
    """Known limits (README, docs/parser.md and the model card)."""
    return "\n".join(f"- {text}" for text in limits(results, ud_pipeline)) + "\n"
