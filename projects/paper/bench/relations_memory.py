"""Relation memory benchmark: time and peak RSS growth of `pairatt_rel` on one Doc
with many candidate entities.

The issue's case: one Doc of 4-token sentences with one entity each, so every entity is alone in
its window and no two entities share one. The pipeline is built from
configs/rel_semeval_minilm.cfg (all-MiniLM-L6-v2, attention on) and initialised, not trained:
memory does not depend on the weights. Each size runs in a fresh process; its growth is the
process's peak RSS while `nlp(doc)` runs (VmHWM, reset just before) less its RSS before.

    python bench/relations_memory.py --output results/bench_relations_memory.json
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import spacy
import torch
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training.initialize import init_nlp

from spacy_pairatt.corpora.relation_metrics import SEMEVAL_RELATIONS
from spacy_pairatt.integration.doc_relations import register_relations_extension
from spacy_pairatt.reporting.json_files import write_json
from spacy_pairatt.reporting.provenance import code_at_start, provenance

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "rel_semeval_minilm.cfg"
SEED = 0  # the config's system.seed: the untrained weights
GOAL_ENTITIES, GOAL_GROWTH_MB = 1000, 1536  # the goal: 1,000 entities under +1.5 GB


def status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (VmRSS, VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> None:
    """Start VmHWM again from the current RSS (Linux: clear_refs 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def entity_doc(nlp: Language, n_entities: int) -> Doc:
    """The issue's Doc: n 4-token sentences "E<i> was here .", the first token of each an entity."""
    words = [word for i in range(n_entities) for word in (f"E{i}", "was", "here", ".")]
    doc = Doc(nlp.vocab, words=words, sent_starts=[i % 4 == 0 for i in range(len(words))])
    doc.ents = [doc.char_span(doc[i].idx, doc[i].idx + len(doc[i].text), "ENTITY") for i in range(0, len(words), 4)]
    return doc


def training_docs(nlp: Language) -> List[Doc]:
    """One two-entity Doc per SemEval relation type: what initialisation needs to size the scorer."""
    register_relations_extension()
    docs = []
    for relation in SEMEVAL_RELATIONS:
        doc = entity_doc(nlp, 2)
        doc._.relations = [(doc.ents[0], doc.ents[1], relation)]
        docs.append(doc)
    return docs


def initialized_pipeline(folder: Path) -> Language:
    """configs/rel_semeval_minilm.cfg initialised on `training_docs` (train and dev corpus)."""
    corpus = folder / "relations.spacy"
    DocBin(docs=training_docs(spacy.blank("en")), store_user_data=True).to_disk(corpus)
    config = spacy.util.load_config(CONFIG, overrides={"paths.train": str(corpus), "paths.dev": str(corpus)})
    return init_nlp(config)


def child(n_entities: int) -> Dict:
    with tempfile.TemporaryDirectory() as folder:
        nlp = initialized_pipeline(Path(folder))
    nlp(entity_doc(nlp, 3))  # warm-up
    doc = entity_doc(nlp, n_entities)
    gc.collect()
    before = status_mb("VmRSS")
    reset_peak_rss()
    start = time.perf_counter()
    nlp(doc)
    seconds = time.perf_counter() - start
    peak = status_mb("VmHWM")
    return {
        "entities": n_entities,
        "tokens": len(doc),
        "candidate_pairs": n_entities * (n_entities - 1),
        "seconds": seconds,
        "rss_mb_before": before,
        "peak_rss_mb": peak,
        "peak_rss_growth_mb": peak - before,
        "relations_written": len(doc._.relations),
        "torch_threads": torch.get_num_threads(),
        "load_average_1min_after": os.getloadavg()[0],  # other work on the machine slows the timing
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="50,200,500,1000")
    parser.add_argument("--output", default="results/bench_relations_memory.json")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    runs: List[Dict] = []
    for size in (int(s) for s in args.sizes.split(",")):
        command = [sys.executable, __file__, "--child", str(size)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(output.strip().splitlines()[-1]))
        print(runs[-1], flush=True)
    goal = [run for run in runs if run["entities"] == GOAL_ENTITIES]
    result = {
        "config": str(CONFIG.relative_to(CONFIG.parents[1])),
        "doc": "one Doc of 4-token sentences, one single-token entity each (no two entities share a window)",
        "runs": runs,
        "goal": {"entities": GOAL_ENTITIES, "peak_rss_growth_mb_below": GOAL_GROWTH_MB},
        "goal_met": bool(goal) and goal[0]["peak_rss_growth_mb"] < GOAL_GROWTH_MB,
        "provenance": provenance(seed=SEED),
    }
    print(write_json(args.output, result))


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    main()
