"""Known limits (templates/limits.md): the README, docs/parser.md and the model card state the same ones; the
functions here write those with measured figures, for en_pairatt (`ud_pipeline`) or the parser alone."""

import re
from pathlib import Path
from typing import Dict, List, Optional

from spacy_pairatt.reports import percent

from .curve_blocks import CURVE_JSON, comparison_entries, shown_entries
from .results import Results
from .ud_blocks import LEMMAS_BAR, SENTENCE_F_BAR, UD_PIPELINE_DEV_DOCS, against_bar, ud_pipeline_file

TEMPLATE = Path(__file__).parent / "templates" / "limits.md"


def stale_bench(results: Results, path: str) -> str:
    """ "; stale: measured before ..." when code that changes the benchmark came after `path`, else ""."""
    stale = results.made(path, "bench").stale_since()
    return f"; stale: measured before {stale.what}" if stale else ""


def speed(results: Results, ud_pipeline: bool = True) -> str:
    found = results.json("results/bench_speed.json")
    if found is None:
        return "Speed: not measured yet (`python -m spacy project run bench`)."
    if "models" not in found:
        raise ValueError(
            "results/bench_speed.json has no `models` (written before bench/speed.py recorded the pipelines "
            "it timed); re-run: python -m spacy project run bench"
        )
    inference, threads = found["inference"], found["machine"].get("torch_threads", "?")
    when = stale_bench(results, "results/bench_speed.json")
    weights = {
        frozenset(): "untrained weights",
        frozenset({"pairatt_parser"}): "trained pairatt_parser, initialised transition parser",
        frozenset({"transition"}): "initialised pairatt_parser, trained transition parser",
    }.get(frozenset(name for name, path in found["models"].items() if path), "trained pipelines")
    return (
        f"Speed (results/bench.md, {weights}, {threads} torch threads{when}): "
        f"transformer + pairatt_parser ran at {inference['ratio_b_over_a']:.2f} times the transformer's own "
        f"speed (target 0.85); spaCy's transition parser on the same encoder, without attention output, "
        f"ran at {1 / inference['ratio_b_over_c_wordpiece_batched']:.2f} times pairatt's speed with the same "
        "wordpiece batching."
    )


def attention_memory(results: Results, ud_pipeline: bool = True) -> str:
    memory = results.json("results/bench_memory.json")
    if memory is None:
        return ""
    kept = memory["bytes_kept_per_doc"]
    return (
        f" (on EWT {kept['no release component'] / 1e3:,.0f} kB a Doc kept without it, "
        f"{kept['release'] / 1e3:,.0f} kB with it; results/bench.md)"
    )


# The targets for a long parse: peak RSS growth from the shortest stream to one of up to 20,000 sentences
# (longer streams: the second), and the share of parse speed the heap release may cost. A bench whose longest
# stream is shorter than HEAP_LONG_STREAM says nothing about a long parse.
HEAP_GROWTH_BARS = ((20_000, 0.10), (float("inf"), 0.15))
HEAP_LONG_STREAM = 20_000
HEAP_RELEASE_SPEED_BAR = 0.03


def heap_growth_within_bars(memory: Dict) -> bool:
    """Every released run's peak RSS within its bar of the shortest run's, the longest run at least
    HEAP_LONG_STREAM sentences, at no more than the speed bar."""
    runs = [run for run in memory["runs"] if run.get("heap_release")]
    if len(runs) < 2 or max(run["sentences"] for run in runs) < HEAP_LONG_STREAM:
        return False
    if memory["speed_check"]["speed_cost_at_default_interval"] > HEAP_RELEASE_SPEED_BAR:
        return False
    shortest = min(runs, key=lambda run: run["sentences"])["peak_rss_mb_while_parsing"]
    bars = [next(bar for size, bar in HEAP_GROWTH_BARS if run["sentences"] <= size) for run in runs]
    return all(run["peak_rss_mb_while_parsing"] <= (1 + bar) * shortest for run, bar in zip(runs, bars))


def heap(results: Results, ud_pipeline: bool = True) -> Optional[str]:
    """What the memory benchmark measured of a long parse's heap; nothing once it is within the targets."""
    memory = results.json("results/bench_memory.json")
    if memory is None:
        return "Memory over a long parse: not measured yet (`python -m spacy project run bench-memory`)."
    sizes = [run["sentences"] for run in memory["runs"]]
    when = stale_bench(results, "results/bench_memory.json")
    growth = (
        f"peak RSS grew {100 * memory['peak_rss_growth']:+.0f}% from {min(sizes):,} to {max(sizes):,} "
        f"streamed sentences (results/bench.md{when})"
    )
    if "heap_release" not in memory:  # measured before parsing handed free heap back
        return (
            f"Parsing runs on glibc's own malloc thresholds (training bounds the heap): {growth}, against the "
            "target of under 10%, met under the bound. The growth is heap glibc keeps, not live data "
            "(docs/performance.md#memory)."
        )
    if heap_growth_within_bars(memory) and not when:
        return None
    cost = memory["speed_check"]["speed_cost_at_default_interval"]
    return (
        f"Parsing hands glibc's free heap back every {memory['heap_release']['words_between']:,} words "
        f"(`integration/memory.py`): {growth}, against the target of +10% (+15% beyond 20,000), at "
        f"{100 * cost:.1f}% of parse speed (target {100 * HEAP_RELEASE_SPEED_BAR:.0f}%)."
    )


def attention_gradient(results: Results, ud_pipeline: bool = True) -> str:
    """What the attention curve measured of the config that carries attention gradients: ft:emb+att - emb+att
    on EWT test, paired by seed, at each size the curve trained it."""
    from spacy_pairatt.study.attention_curve_table import sentences

    found = results.json(CURVE_JSON)
    entries = comparison_entries(shown_entries(found), "ftatt", "att") if found else []
    if not entries:
        return ""
    gains = "; ".join(
        f"{sentences(e['n_train'], e['size'])} sentences {e['pooled']:+.2f} ({e['verdict']}; "
        f"seeds {', '.join(map(str, e['seeds']))})"
        for e in entries
    )
    return (
        f" What it adds to attention as a feature, EWT test LAS pooled over training seeds on seeded "
        f"subsets of EWT train (docs/attention_curve.md): {gains}; not measured with more than "
        f"{max(e['n_train'] for e in entries):,} training sentences."
    )


def max_unsegmented_tokens(results: Results, ud_pipeline: bool = True) -> str:
    return f"{package_constant('MAX_UNSEGMENTED_TOKENS'):,}"


def package_constant(name: str):
    """A module-level constant of spacy_pairatt, read from its source: the module that holds it imports spaCy."""
    import ast

    import spacy_pairatt

    for path in sorted(Path(spacy_pairatt.__file__).parent.rglob("*.py")):
        found = re.search(rf"^{name}(?:: \w+)? = ([^#\n]+)", path.read_text(encoding="utf8"), flags=re.M)
        if found:
            return ast.literal_eval(found[1].strip())
    raise ValueError(f"no `{name} = ...` in spacy_pairatt")


def segmenter(results: Results, ud_pipeline: bool = True) -> str:
    """Where raw text's sentences come from, and what their errors cost the parse."""
    own, gold = (
        (results.json(UD_PIPELINE_DEV_DOCS), results.json("results/ud_pipeline_dev.json"))
        if ud_pipeline
        else (results.json("results/pairatt_dev_docs_senter.json"), results.json("results/pairatt_dev_docs_gold.json"))
    )
    figures = ""
    if own is not None and gold is not None and ud_pipeline:
        sentence_f = 100 * own["scores"]["sents_f"]
        figures = (
            f" (EWT dev: sentence F {sentence_f:.1f}, {against_bar(sentence_f, SENTENCE_F_BAR)}, and LAS "
            f"{percent(own['scores']['dep_las'])} in Docs of 10 sentences, against LAS "
            f"{percent(gold['scores']['dep_las'])} with gold sentences; docs/ud_pipeline.md)"
        )
    elif own is not None and gold is not None:
        figures = (
            f" (EWT dev Docs of 10 sentences: LAS {percent(own['scores']['dep_las'])} with the senter against "
            f"{percent(gold['scores']['dep_las'])} with gold sentences; docs/parser.md)"
        )
    source = "the pipeline's senter on the shared transformer" if ud_pipeline else "a small CNN senter trained on EWT"
    return (
        f"On raw text the sentence boundaries come from {source}; its errors become parse errors, since each "
        f"sentence gets its own tree{figures}."
    )


def annotation(results: Results, ud_pipeline: bool = True) -> str:
    """What the shipped pipeline annotates, and its weakest annotation."""
    if not ud_pipeline:
        return "Predicts heads and UD dependency labels only: no tags, lemmas, morphology or entities."
    from spacy_pairatt.evaluation.ud_eval import f1_percent

    scores = results.json(ud_pipeline_file("test", "gold_tokens"))
    lemmas = ""
    if scores is not None:
        f1 = f1_percent(scores, "Lemmas")
        lemmas = (
            f" Lemmas F1 {f1:.1f} on EWT test with gold tokens, {against_bar(f1, LEMMAS_BAR)}; docs/ud_pipeline.md."
        )
    return (
        "Predicts sentences, XPOS, UPOS, morphological features, lemmas, heads and UD dependency labels; no "
        f"entities.{lemmas}"
    )


class Figures(dict):
    """The template's `{name}`s, each written by the function of that name when the template asks for it."""

    def __init__(self, results: Results, ud_pipeline: bool):
        super().__init__()
        self.results, self.ud_pipeline = results, ud_pipeline

    def __missing__(self, name: str) -> Optional[str]:
        return globals()[name](self.results, self.ud_pipeline)


def limits(results: Results, ud_pipeline: bool = True) -> List[str]:
    """ud_pipeline: the limits of en_pairatt (`package`), else of the parser alone (`package-parser`)."""
    template = re.sub(r"<!--.*?-->\n", "", TEMPLATE.read_text(encoding="utf8"), flags=re.S)
    figures, texts = Figures(results, ud_pipeline), []
    for item in (" ".join(item.split()) for item in re.split(r"^- ", template, flags=re.M)[1:]):
        whole = re.fullmatch(r"\{(\w+)\}", item)
        texts.append(figures[whole[1]] if whole else item.format_map(figures))
    return [text for text in texts if text]


def limits_block(results: Results, ud_pipeline: bool = True) -> str:
    """Known limits (README, docs/parser.md and the model card)."""
    return "\n".join(f"- {text}" for text in limits(results, ud_pipeline)) + "\n"
