"""Where a generated block's figures come from: the results files behind it, when each was made (its
provenance's date, else the date git committed it, with "no provenance recorded"), and **stale** when
code that changes such results came after (`CODE_CHANGES`, kept by hand)."""

import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Dict, FrozenSet, Optional, Sequence, Tuple

from ..json_files import read_json


@dataclass(frozen=True)
class CodeChange:
    """A change of the code after which results of the kinds it `affects` must be made again."""

    date: str  # ISO 8601, UTC: the commit's date
    commit: str
    what: str
    affects: FrozenSet[str]


# The result kinds: "parser" (pairatt_parser pipelines: accuracy and speed), "ud_pipeline" (the UD
# pipeline of configs/pipeline_minilm.cfg, whose parser is pairatt_parser), "transition" (spaCy's
# transition parser), "relations" (pairatt_rel), "bench" (bench/*.py on pairatt), "probe", "tokenizer"
# (tokenizer-eval), "footprint" (the disk the installed stack, the data and the trained models take).
RESULT_KINDS = frozenset(
    {"parser", "ud_pipeline", "transition", "relations", "bench", "probe", "tokenizer", "footprint"}
)
CODE_CHANGES = (
    CodeChange(
        "2026-11-22T17:45:16+00:00", "64036e9", "labels scored on decoded arcs and dropout off at inference",
        frozenset({"parser", "ud_pipeline"}),
    ),
    CodeChange(
        "2026-11-22T18:37:17+00:00", "359c55e", "the wordpiece-batched `pairatt_transformer`",
        frozenset({"parser", "ud_pipeline"}),
    ),
    CodeChange(
        "2026-11-25T09:49:34+00:00", "52bb9f7", "the batched torch feature path and the compiled MST decoder",
        frozenset({"parser", "ud_pipeline", "bench", "relations", "probe"}),
    ),
    CodeChange(
        "2026-11-25T13:08:53+00:00", "522d06f", "the attention in width buckets and chunks padded at most twofold",
        frozenset({"parser", "ud_pipeline", "bench"}),
    ),
    CodeChange(
        "2026-11-25T22:50:32+00:00", "3780e18", "the UD pipeline's tagging heads reading spelling (SurfaceTok2Vec)",
        frozenset({"ud_pipeline"}),
    ),
    # Training's loss and gradients are unchanged (tests/test_scorer.py checks them against a direct
    # computation), so trained models and their accuracy stand; the training step's time does not.
    CodeChange(
        "2026-11-26T03:53:57+00:00", "7ef7aaf", "labels scored on the gold arcs only in training",
        frozenset({"bench"}),
    ),
    # Predictions are unchanged (the same pooled values and scores in another order of sums: tests
    # check both orders against a direct computation), so trained models and their accuracy stand;
    # parse and training times do not.
    CodeChange(
        "2026-11-26T06:42:11+00:00", "d1f8429", "attention projected before it is pooled, labels once per head",
        frozenset({"bench"}),
    ),
    # The configs' learning rate: every model trained from parser_minilm.cfg, parser_minilm_ftatt.cfg
    # or transition_minilm.cfg before it (accuracy, training cost, the attention curve, the ablation's
    # fine-tuned rows) was trained at 1e-4.
    CodeChange(
        "2026-11-26T12:02:56+00:00", "8b30652", "the default learning rate 3e-4 (a dev sweep)",
        frozenset({"parser", "transition"}),
    ),
    # Predictions are unchanged (identical heads and labels on 600 EWT test sentences; the pooling
    # tests compare against a direct computation), so trained models and their accuracy stand.
    CodeChange(
        "2026-11-26T12:20:40+00:00", "efe8386", "windows bucketed as views of the transformer's output, no copy",
        frozenset({"bench"}),
    ),
    # Parses are unchanged (the same heads and labels on 600 EWT test sentences; the outputs, attention
    # weights and gradients match Hugging Face's forward in tests), so trained models stand.
    CodeChange(
        "2026-11-26T14:49:30+00:00", "a2a63e7", "the fused eager self-attention",
        frozenset({"bench"}),
    ),
    # Parses are unchanged (identical heads and labels on 600 EWT test sentences, every scorer term
    # non-zero; tests compare the shared projections with each chunk's own), so trained models stand.
    CodeChange(
        "2026-11-26T21:25:33+00:00", "5fd098c", "shared attention projections, label MLPs on scored words",
        frozenset({"bench"}),
    ),
    # Parses and training are unchanged (malloc's thresholds change no arithmetic), so trained models
    # and their accuracy stand; parse speed and memory do not (training keeps the bound it had).
    CodeChange(
        "2026-11-27T11:27:54+00:00", "6a42ef9", "the heap bound in training only, parsing on glibc's own thresholds",
        frozenset({"bench"}),
    ),
    # Parses are unchanged (identical heads and labels on all of EWT test; the alignment tests compare
    # the counts with a direct computation), so trained models stand; parse speed does not.
    CodeChange(
        "2026-11-27T13:00:25+00:00", "30769c5", "windows bucketed with one memory read per array, bincount counts",
        frozenset({"bench"}),
    ),
    # Parses are unchanged (identical heads and labels on all of EWT test; a test checks the arc scores
    # and gradients against projecting every row), so trained models stand; parse speed does not.
    CodeChange(
        "2026-11-27T13:35:50+00:00", "240a705", "chunks padded up to fourfold, arc MLPs on nonzero rows only",
        frozenset({"bench"}),
    ),
    # Parses are unchanged (malloc_trim frees no live memory), so trained models stand; parse memory and
    # speed do not.
    CodeChange(
        "2026-11-27T22:56:34+00:00", "0af897d", "parsing hands free heap back every 25,000 words",
        frozenset({"bench"}),
    ),
    # Parses are unchanged (the confidence is computed after decoding; a test parses with it on and
    # off), so trained models stand; parse speed does not.
    CodeChange(
        "2026-11-27T22:42:00+00:00", "89ab7f2", "the parser storing its arc confidence (tree marginals) by default",
        frozenset({"bench"}),
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
            self._json[path] = read_json(self.root / path)
        return self._json[path]

    def made(self, path: str, kind: str) -> Made:
        if kind not in RESULT_KINDS:
            raise ValueError(f"unknown result kind {kind!r} for {path}: one of {sorted(RESULT_KINDS)}")
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
