"""Dev scores of a training config at several values of one or more settings: the sweeps behind its defaults.

Each value trains the config as it is with `--SETTING VALUE` (same seed, steps, schedule and data;
the learning rate by default, or e.g. `components.pairatt_parser.model.pair_scorer.label_width`),
`--parallel` of them at once (on a GPU the runs are bound by the host, so several share it well).
With several settings, each value is a comma-joined tuple, one entry per setting, so that settings
which only matter together (two widths) are swept as pairs.
spaCy's own evaluation rows (dev UAS/LAS at every `eval_frequency` steps) are read from each run's
log; model-best is the row with the highest UAS + LAS. Test data is not read: the sweep only chooses.

    python bench/sweep.py --values 1e-4 2e-4 3e-4 5e-4 8e-4 --gpu-id 0 --parallel 5
    python bench/sweep.py --setting components.pairatt_parser.model.pair_scorer.label_width --values 32 64 128 \
        --gpu-id 0 --parallel 3 --results results/gpu/label_width_sweep
    python bench/sweep.py --setting components.pairatt_parser.model.pair_scorer.label_width \
        components.pairatt_parser.model.pair_scorer.arc_width --values 128,256 64,256 64,128 --gpu-id 0 --parallel 3

writes RESULTS/{run name}.log (`lr_3e-4`, `label_width_64`, `label_width_64_arc_width_128`: `lr` for
the learning rate, else each setting's last part), RESULTS.json and RESULTS.md (default
results/gpu/lr_sweep). --from-logs DIR tables runs made
elsewhere (logs named as above) with --commit and --versions-from naming the code and libraries they
ran with, and --started/--ended (Unix seconds) when they ran.
"""

import argparse
import json
import re
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from spacy_pairatt.reporting.json_files import write_json  # noqa: E402
from spacy_pairatt.reporting.provenance import code_at_start, command_as_typed, provenance  # noqa: E402

# spaCy's ConsoleLogger row: epoch, step, the components' losses, then the scores and SCORE.
EVAL_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+((?:[\d.]+\s+)+)([\d.]+)\s*$")


LEARN_RATE = "training.optimizer.learn_rate.initial_rate"


def short_name(setting: str) -> str:
    return "lr" if setting == LEARN_RATE else setting.rsplit(".", 1)[-1]


def overrides(settings: List[str], value: str) -> List[Tuple[str, str]]:
    """(setting, value) pairs of one sweep value: `64,128` over two settings gives two overrides."""
    parts = value.split(",") if len(settings) > 1 else [value]
    if len(parts) != len(settings):
        raise SystemExit(
            f"the value {value!r} has {len(parts)} comma-joined parts for {len(settings)} settings "
            f"({', '.join(settings)}): give one part per setting"
        )
    return list(zip(settings, parts))


def run_name(settings: List[str], value: str) -> str:
    """The file stem of one run's log and trained pipeline: `lr_3e-4`, `label_width_64_arc_width_128`."""
    return "_".join(f"{short_name(setting)}_{part}" for setting, part in overrides(settings, value))


def log_name(settings: List[str], value: str) -> str:
    return f"{run_name(settings, value)}.log"


def train_command(config: str, settings: List[str], value: str, output: Path, gpu_id: int) -> List[str]:
    command = [sys.executable, "-m", "spacy", "train", config, "--output", str(output), "--gpu-id", str(gpu_id)]
    for setting, part in overrides(settings, value):
        command += [f"--{setting}", part]
    return command


def eval_rows(log: str, columns: List[str]) -> List[Dict]:
    """spaCy's evaluation rows of a training log: step and the named score columns (in %), which are
    the last ones before SCORE, in the header's order."""
    rows = []
    for line in log.splitlines():
        match = EVAL_ROW.match(line)
        if not match:
            continue
        values = [float(v) for v in match.group(3).split()][-len(columns) :]
        rows.append({"step": int(match.group(2)), **dict(zip(columns, values)), "score": float(match.group(4))})
    if not rows:
        raise SystemExit("no evaluation rows in the training log: was it cut off before the first evaluation?")
    return rows


def score_columns(log: str) -> List[str]:
    """The score columns of the log's header, lowercased: the names between the last `LOSS NAME` pair
    and SCORE (`E  #  LOSS TRANS...  LOSS PAIRA...  DEP_UAS  DEP_LAS  SENTS_F  SCORE`)."""
    for line in log.splitlines():
        names = line.split()
        if names[:2] == ["E", "#"] and "SCORE" in names:
            first = max((i for i, name in enumerate(names) if name == "LOSS"), default=0) + 2
            return [name.lower() for name in names[first : names.index("SCORE")]]
    raise SystemExit("no header row (E  #  ...  SCORE) in the training log")


def table(values: List[str], logs: Dict[str, str]) -> List[Dict]:
    runs = []
    for value in values:
        columns = score_columns(logs[value])
        if not {"dep_uas", "dep_las"} <= set(columns):
            raise SystemExit(
                f"the log at {value} has no DEP_UAS and DEP_LAS columns: the sweep chooses by a parser's dev scores"
            )
        rows = eval_rows(logs[value], columns)
        # The log rounds SCORE to two digits; the config weighs UAS and LAS equally, so their sum at the
        # logged precision orders the evaluations, the later one winning a tie.
        best = max(rows, key=lambda row: (round(row["dep_uas"] + row["dep_las"], 2), row["step"]))
        runs.append({"value": value, "rows": rows, "best": best, "last": rows[-1]})
    return runs


def code_state(code: Dict) -> str:
    """The commit a run's code came from, naming the files it had changed (runs on a copied checkout)."""
    changed = f" with uncommitted changes to {', '.join(code['dirty_paths'])}" if code.get("dirty") else ""
    return f"{(code['commit'] or '?')[:8]}{changed}"


def markdown(record: Dict) -> str:
    prov = record["provenance"]
    lines = [
        f"# Sweep of {', '.join(f'`{setting}`' for setting in record['settings'])} in {record['config']} "
        "(python bench/sweep.py)",
        "",
        f"EWT dev UAS/LAS as spaCy's training log gives them; seed {prov['seed']}; "
        f"commit {code_state(prov['code'])}; {record['device']}; {prov['created']}. "
        "model-best: the evaluation with the highest UAS + LAS (the config's score weights). Test data not read.",
        "",
        f"| {' / '.join(short_name(setting) for setting in record['settings'])} | "
        + " | ".join(f"LAS @{row['step']}" for row in record["runs"][0]["rows"][1:])
        + " | model-best UAS | model-best LAS |",
        "|---" * (len(record["runs"][0]["rows"]) + 2) + "|",
    ]  # fmt: skip
    best = max(record["runs"], key=lambda run: run["best"]["dep_uas"] + run["best"]["dep_las"])["value"]
    for run in record["runs"]:
        las = " | ".join(f"{row['dep_las']:.2f}" for row in run["rows"][1:])
        mark = " (best on dev)" if run["value"] == best else ""
        lines.append(f"| {run['value']}{mark} | {las} | {run['best']['dep_uas']:.2f} | {run['best']['dep_las']:.2f} |")
    return "\n".join(lines) + "\n"


def command_of(args, value: str) -> List[str]:
    output = Path(args.output_dir) / run_name(args.settings, value)
    return train_command(args.config, args.settings, value, output, args.gpu_id)


def run_sweep(args, results: Path) -> Dict[str, str]:
    """Train every value, `args.parallel` at a time; each run's output goes to results/{run_name}.log."""
    logs = {value: results / log_name(args.settings, value) for value in args.values}
    pending = list(args.values)
    running = []
    while pending or running:
        while pending and len(running) < args.parallel:
            value = pending.pop(0)
            log = logs[value].open("w", encoding="utf8")
            process = subprocess.Popen(command_of(args, value), stdout=log, stderr=subprocess.STDOUT)
            running.append((value, process, log))
        time.sleep(2)
        for item in [item for item in running if item[1].poll() is not None]:
            running.remove(item)
            item[2].close()
            if item[1].returncode != 0:
                raise SystemExit(f"training at {', '.join(args.settings)} = {item[0]} failed: see {logs[item[0]]}")
    return {value: path.read_text(encoding="utf8") for value, path in logs.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/parser_minilm.cfg")
    parser.add_argument(
        "--setting", dest="settings", nargs="+", default=[LEARN_RATE], help="config paths (spaCy's override names)"
    )
    parser.add_argument("--values", nargs="+", required=True, help="as the config writes them, e.g. 3e-4, 64 or 64,128")
    parser.add_argument("--gpu-id", type=int, default=-1)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--output-dir", default="training/sweep", help="the trained pipelines")
    parser.add_argument("--results", default="results/gpu/lr_sweep")
    parser.add_argument("--device", default=None, help="the machine, in words (default: CPU or the GPU's name)")
    parser.add_argument("--from-logs", default=None, help="table logs made elsewhere instead of training")
    parser.add_argument("--commit", default=None, help="with --from-logs: the commit the runs ran")
    parser.add_argument("--versions-from", default=None, help="with --from-logs: a results JSON whose versions apply")
    parser.add_argument("--started", type=float, default=None, help="with --from-logs: Unix seconds")
    parser.add_argument("--ended", type=float, default=None, help="with --from-logs: Unix seconds")
    args = parser.parse_args(argv)
    for value in args.values:  # a malformed value stops the sweep before any training
        overrides(args.settings, value)
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    started = time.time()
    if args.from_logs:
        if not (args.commit and args.versions_from and args.started and args.ended):
            raise SystemExit("--from-logs needs --commit, --versions-from, --started and --ended")
        names = {value: log_name(args.settings, value) for value in args.values}
        logs = {value: (Path(args.from_logs) / name).read_text(encoding="utf8") for value, name in names.items()}
        for value, log in logs.items():
            (results / names[value]).write_text(log, encoding="utf8")
    else:
        logs = run_sweep(args, results)
    record = {"config": args.config, "settings": args.settings, "values": args.values, "runs": table(args.values, logs)}
    import spacy  # here, not at the top: the docs tool reads this module's tables without spaCy

    seed = spacy.util.load_config(args.config)["system"]["seed"]  # every run keeps the config's seed
    record["provenance"] = provenance(seed=seed, started=started, command=command_as_typed())
    if args.from_logs:
        versions = json.loads(Path(args.versions_from).read_text(encoding="utf8"))["provenance"]["versions"]
        record["provenance"].update(
            code={"commit": args.commit, "dirty": False, "dirty_paths": []},
            versions=versions,
            versions_from=args.versions_from,
            created=datetime.fromtimestamp(args.ended, timezone.utc).isoformat(timespec="seconds"),
            wall_seconds=round(args.ended - args.started, 1),
        )
        for key in ("cores", "cpu_count", "torch_threads", "cuda"):  # this machine's, not the runs'
            record["provenance"].pop(key, None)
    record["device"] = args.device or ("GPU" if args.gpu_id >= 0 else "CPU")
    record["commands"] = {value: shlex.join(["python", *command_of(args, value)[1:]]) for value in args.values}
    write_json(f"{results}.json", record)
    Path(f"{results}.md").write_text(markdown(record), encoding="utf8")
    print(markdown(record))


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    main()
