"""results/bench.md from bench_speed.json, bench_memory.json, bench_relations_memory.json,
bench_robustness.json and bench_ud_pipeline_speed.json, with the issues' targets and whether each is met.

    python bench/table.py --output results/bench.md
"""

import argparse
import json
from pathlib import Path
from statistics import mean
from typing import Dict, List, Optional, Tuple

from spacy_pairatt.reporting.tables import (
    HEAP_SPEED_BAR,
    heap_growth_targets,
    heap_growth_within_bars,
    heap_release_setting,
    jemalloc_release_setting,
    timed_apart,
    timed_apart_seconds,
)


def load(path: Path) -> Dict:
    return json.loads(path.read_text(encoding="utf8")) if path.exists() else {}


def verdict(met: bool) -> str:
    return "met" if met else "**not met**"


def growth_text(runs: List[Dict]) -> str:
    """Each run's peak RSS growth over the first's: "+9.9% at 20,000, +16.8% at 50,000"."""
    return ", ".join(
        f"{100 * (run['peak_rss_mb_while_parsing'] / runs[0]['peak_rss_mb_while_parsing'] - 1):+.1f}% at "
        f"{run['sentences']:,}"
        for run in runs[1:]
    )


def b_over_a_row(inference: Dict, apart: Optional[Tuple[float, float, float]]) -> str:
    """The b/a target's row: the pipelines' medians with their paired repeats' range and, where the run timed the
    transformer and the parser apart (`timed_apart`), that ratio too, which the machine's drift moves far less.
    Met only if both reach 0.90."""
    ratio, paired = inference["ratio_b_over_a"], inference.get("paired_ratios_over_a", {}).get("b_pairatt")
    measured = f"{ratio:.3f}" + (
        f" (pipelines; paired repeats {min(paired):.2f} to {max(paired):.2f})" if paired else ""
    )
    ratios = [ratio]
    if apart is not None:
        measured += f"; {apart[2]:.3f} timed apart"
        ratios.append(apart[2])
    return f"| b/a ≥ 0.90 (confidence arcs, the default) | {measured} | {verdict(min(ratios) >= 0.90)} |"


def speed_lines(speed: Dict) -> List[str]:
    inference, training, decoding = speed["inference"], speed["training"], speed["decoding"]
    medians = inference["median_words_per_second"]
    lines = [
        "## Speed (`python bench/speed.py`)",
        "",
        f"UD EWT test, {inference['n_sentences']} sentences / {inference['n_words']} words, gold tokens, one sentence",
        f"per Doc, `nlp.pipe` batch {inference['batch_size']}, {inference['repeats']} interleaved repeats, median;",
        f"torch threads {speed['machine']['torch_threads']}. Weights: {speed['weights']}.",
        "",
        "| pipeline | words/s (median) | all repeats |",
        "|---|---|---|",
    ]
    names = {
        "a_transformer": "(a) transformer alone (eager attention, attention output)",
        "a_transformer_hf_attention": "(a0) as (a), Hugging Face's eager self-attention instead of the fused one",
        "b_pairatt": "(b) transformer + pairatt_parser",
        "c_transition": "(c) transformer + transition parser (stock component, SDPA, no attention output)",
        "c_transition_wordpiece_batched": "(c') as (c), batched by `pairatt_transformer`",
    }
    for key, label in names.items():
        if key not in medians:  # (a0): runs made before the fused attention have none
            continue
        values = ", ".join(f"{v:.0f}" for v in inference["words_per_second"][key])
        lines.append(f"| {label} | {medians[key]:.0f} | {values} |")
    ratio_training = training["ratio_pairatt_over_tagger"]
    if "ratio_a_over_a_hf_attention" in inference:
        lines += ["", f"Fused eager self-attention: (a) / (a0) = {inference['ratio_a_over_a_hf_attention']:.3f}."]
    lines += [
        "",
        "| target | measured | |",
        "|---|---|---|",
        b_over_a_row(inference, timed_apart(speed)),
        *(
            [f"| b/a ≥ 0.93 (confidence none) | {none:.3f} | {verdict(none >= 0.93)} |"]
            if (none := inference.get("ratio_b_confidence_none_over_a")) is not None  # GPU runs made before it
            else []
        ),
        f"| b/c ≥ 1.0 | {inference['ratio_b_over_c']:.2f} | {verdict(inference['ratio_b_over_c'] >= 1.0)} |",
        f"| b/c' ≥ 0.85 | {inference['ratio_b_over_c_wordpiece_batched']:.2f} | "
        f"{verdict(inference['ratio_b_over_c_wordpiece_batched'] >= 0.85)} |",
        f"| training step ≤ 1.2 × tagger's | {ratio_training:.2f} "
        f"({training['median_seconds_per_step']['pairatt_parser']:.2f} s vs "
        f"{training['median_seconds_per_step']['tagger']:.2f} s, median of {training['steps']} steps of "
        f"{training['batch_sentences']} sentences) | {verdict(ratio_training <= 1.2)} |",
        f"| MST < 3% of parse time | {100 * decoding['share_of_pipeline']:.1f}% of the pipeline, "
        f"{100 * decoding['share_of_parser_component']:.1f}% of the parser component "
        f"({decoding['seconds_decoding']:.2f} s of {decoding['seconds_pipeline']:.1f} s and of "
        f"{decoding['seconds_parser_component']:.2f} s) | "
        f"{verdict(decoding['share_of_pipeline'] < 0.03)} |",
        *thread_lines(speed.get("threads")),
        "",
        "Profile of (b) over the test set (cProfile, cumulative seconds):",
        "",
        "| stage | seconds |",
        "|---|---|",
    ]
    for stage, seconds in speed["profile"]["seconds_cumulative"].items():
        lines.append(f"| {stage} | {seconds:.2f} |")
    lines.append(f"| total | {speed['profile']['seconds_total']:.2f} |")
    return lines


def thread_lines(threads: Optional[Dict]) -> List[str]:
    """The thread-scaling table of bench/speed.py (runs made before it, and GPU runs, have none)."""
    if not threads:
        return []
    lines = [
        "",
        "Transformer and parser timed apart, batch by batch (median seconds of 3 interleaved passes over the",
        "test set; b/a from those times):",
        "",
        "| torch threads | transformer (s) | parser (s) | b/a |",
        "|---|---|---|---|",
    ]
    for count, run in threads.items():
        transformer, parser = timed_apart_seconds(run)
        lines.append(f"| {count} | {transformer:.2f} | {parser:.2f} | {run['ratio_b_over_a']:.3f} |")
    return lines


def memory_lines(memory: Dict) -> List[str]:
    released = "heap_release" in memory
    lines = [
        "## Memory (`python bench/memory.py`)",
        "",
        "`nlp.pipe` streaming EWT sentences through transformer + pairatt_parser + pairatt_release_attention,",
        "each size in a fresh process; RSS sampled every 50 Docs while parsing."
        + (f" Pipeline: {memory['model']}." if "model" in memory else ""),
    ]
    jemalloc = memory.get("jemalloc", {})
    if released:
        setting = heap_release_setting(memory["heap_release"])
        lines.append(f"On glibc's malloc, parsing {setting}.")
    if any(run.get("heap_release") for run in jemalloc.get("runs", [])):
        lines.append(f"Under jemalloc, parsing {jemalloc_release_setting(jemalloc)}.")
    lines += [
        "",
        "| sentences | allocator | heap release | releases (s releasing) | RSS before parsing (MB) | peak RSS "
        "while parsing (MB) | process peak (MB) | words/s | heap in use / free at the end (MB) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in memory["runs"] + jemalloc.get("runs", []):
        allocator = run.get("allocator", "glibc")
        release = "on" if run.get("heap_release") else f"off ({allocator.split()[0]}'s own)"
        releases = f"{run.get('heap_releases', 0)} ({run.get('heap_release_seconds', 0):.2f})"
        heap = (f"{run['heap_in_use_mb_at_end']:.0f} / {run['heap_free_mb_at_end']:.0f}"
                if "heap_in_use_mb_at_end" in run else "–")  # fmt: skip
        cells = (f"{run['sentences']:,}", allocator, release, releases if run.get("heap_release") else "–",
                 *(f"{run[key]:.0f}" for key in ("rss_mb_before_parsing", "peak_rss_mb_while_parsing",
                                                  "peak_rss_mb_process", "words_per_second")), heap)  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    compared = [run for run in memory["runs"] if run.get("heap_release", False) == released]
    cost = memory["speed_check"]["speed_cost_at_default_interval"] if released else 0.0
    lines += [
        "",
        f"Targets: peak RSS growth over the shortest run {heap_growth_targets()}, at most "
        f"{100 * HEAP_SPEED_BAR:.0f}% of parse speed.",
        "",
        f"- glibc{' with the release' if released else ''}: {growth_text(compared)} "
        f"(words/s ratio {memory['words_per_second_ratio']:.2f}, linear time)"
        + (f", {100 * cost:.1f}% of parse speed" if released else "")
        + f": {verdict(heap_growth_within_bars(compared, cost))}."
        + (
            f" Without the release: {100 * memory['peak_rss_growth_without_release']:+.1f}%."
            if "peak_rss_growth_without_release" in memory
            else ""
        ),
    ]
    if jemalloc:
        check = jemalloc["speed_check"]
        lines.append(
            f"- {jemalloc['version']} (LD_PRELOAD, as `python -m spacy_pairatt` runs where it is installed"
            f"{', with the release' if jemalloc['runs'][0].get('heap_release') else ''}): "
            f"{growth_text(jemalloc['runs'])}, words/s {100 * -check['speed_cost']:+.1f}% against glibc's malloc: "
            f"{verdict(heap_growth_within_bars(jemalloc['runs'], check['speed_cost']))}."
        )
    if released:
        check = memory["speed_check"]
        lines += [
            "",
            f"What glibc's release costs in speed, in one process: {len(check['words_per_second_off'])} pairs of "
            f"blocks of the same {check['block_sentences']:,} EWT dev sentences ({check['block_words']:,} words), off "
            f"and on in turn (on: as the components run, {check['releases_per_on_block']} releases made; off: no "
            f"release, glibc's mmap threshold at its ceiling): mean words/s {mean(check['words_per_second_on']):.0f} "
            f"on, {mean(check['words_per_second_off']):.0f} off (ratio {check['mean_ratio_on_over_off']:.3f}); "
            f"{100 * check['speed_cost_at_default_interval']:.1f}% of parse speed.",
        ]
    if jemalloc:
        check = jemalloc["speed_check"]
        releases = check.get("heap_releases_jemalloc")
        lines += [
            "",
            f"jemalloc{' with the release' if jemalloc['runs'][0].get('heap_release') else ''} against glibc's "
            "malloc left alone (no release, mmap threshold at its ceiling): "
            f"{check['processes_per_allocator']} fresh processes each, taking turns, each timing the same block "
            f"{check['passes_per_process']} times after an untimed pass"
            + (f" (releases under jemalloc: {releases})" if releases is not None else "")
            + f": mean words/s {mean(check['words_per_second_jemalloc']):.0f} under jemalloc, "
            f"{mean(check['words_per_second_glibc']):.0f} under glibc (ratio "
            f"{check['mean_ratio_jemalloc_over_glibc']:.3f}; words per CPU second {100 * -check['cpu_cost']:+.1f}%).",
        ]
    lines += [
        "",
        "Mean bytes one parsed Doc keeps in `doc._.trf_data` and `doc._.pairatt_attention`:",
        "",
        "| pipeline end | bytes per Doc |",
        "|---|---|",
    ]
    for label, size in memory["bytes_kept_per_doc"].items():
        lines.append(f"| {label} | {size:,} |")
    return lines


def relations_memory_lines(relations: Dict) -> List[str]:
    lines = [
        "## Relations memory (`python bench/relations_memory.py`)",
        "",
        f"`pairatt_rel` from `{relations['config']}`, initialised (not trained), on {relations['doc']};",
        f"each size in a fresh process, torch threads {relations['runs'][0]['torch_threads']}. Growth: peak RSS while",
        "`nlp(doc)` runs less RSS before it. Untrained weights write a relation for most pairs.",
        "",
        "| entities | ordered pairs | seconds | peak RSS growth (MB) | relations written |",
        "|---|---|---|---|---|",
    ]
    for run in relations["runs"]:
        lines.append(
            f"| {run['entities']:,} | {run['candidate_pairs']:,} | {run['seconds']:.1f} | "
            f"{run['peak_rss_growth_mb']:,.0f} | {run['relations_written']:,} |"
        )
    goal = relations["goal"]
    loads = [run["load_average_1min_after"] for run in relations["runs"]]
    lines += [
        "",
        f"Goal: {goal['entities']:,} entities in one Doc under +{goal['peak_rss_growth_mb_below']:,} MB: "
        f"{verdict(relations['goal_met'])}. Other work shared the {relations['provenance']['cores']} cores "
        f"(1-minute load average {min(loads):.1f} to {max(loads):.1f} after the runs), which slows the timing.",
    ]
    return lines


def robustness_lines(robustness: Dict) -> List[str]:
    outcome = "passed" if robustness["passed"] else "**failed**"
    return [
        "## Robustness (`python bench/robustness.py`)",
        "",
        f"`{robustness['test']}` with {robustness['examples']:,} hypothesis examples: {outcome} "
        f"in {robustness['seconds']:.0f} s.",
    ]


# The whole UD pipeline may lose at most this share of its words/s to a new segmenter (issue 54).
SEGMENTER_SPEED_BAR = 0.95


def ud_pipeline_speed_lines(speed: Dict) -> List[str]:
    """Each whole UD pipeline's words/s on raw text, and its ratio to the first (the reference)."""
    reference = next(iter(speed["words_per_second"]))
    lines = [
        "## The whole UD pipeline on raw text (`python bench/ud_pipeline_speed.py`)",
        "",
        f"EWT test as `parse` reads ud-text's file ({speed['paragraphs']:,} paragraphs, a Doc each; "
        f"{speed['words']:,} words), every component, `nlp.pipe` batch {speed['batch_size']}, "
        f"{len(speed['seconds'][reference])} rounds in turns, the order reversed every other round, "
        f"after an untimed pass, median; torch threads {speed['torch_threads']}.",
        "",
        "| pipeline | path | words/s (median) | all rounds (s) | ratio to the first | paired ratio (median; range) |",
        "|---|---|---|---|---|---|",
    ]
    for name, value in speed["words_per_second"].items():
        rounds = ", ".join(f"{seconds:.1f}" for seconds in speed["seconds"][name])
        ratio, paired = speed["ratio_to_reference"][name], speed["paired_ratios"][name]
        lines.append(
            f"| {name} | `{speed['pipelines'][name]}` | {value:,.0f} | {rounds} | {ratio:.3f} | "
            f"{speed['median_paired_ratio'][name]:.3f}; {min(paired):.3f} to {max(paired):.3f} |"
        )
    judged = speed["judged"]
    worst = min(min(speed["ratio_to_reference"][name], speed["median_paired_ratio"][name]) for name in judged)
    lines += ["", f"Target: {', '.join(judged)} at least {SEGMENTER_SPEED_BAR:.2f} of the first, by the ratio of "
              f"the medians and by the median paired ratio (the lower: {worst:.3f}), "
              f"{verdict(worst >= SEGMENTER_SPEED_BAR)}."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results")
    parser.add_argument("--output", default="results/bench.md")
    args = parser.parse_args()
    results = Path(args.results)
    sections = [["# Benchmarks (python -m spacy project run bench projects/paper)", "", "Measured on 2 CPU cores."]]
    renderers = (
        ("speed", speed_lines),
        ("memory", memory_lines),
        ("relations_memory", relations_memory_lines),
        ("robustness", robustness_lines),
        ("ud_pipeline_speed", ud_pipeline_speed_lines),
    )
    for name, render in renderers:
        data = load(results / f"bench_{name}.json")
        if data:
            sections.append(render(data))
    text = "\n\n".join("\n".join(lines) for lines in sections) + "\n"
    Path(args.output).write_text(text, encoding="utf8")
    print(text)


if __name__ == "__main__":
    main()
