"""Wall time and peak memory of one command (a training run), with provenance, as a results JSON.

The peak RSS is the kernel's `ru_maxrss` of the finished children, the figure `/usr/bin/time -v`
prints as "Maximum resident set size": the largest single process of the command's tree, not a
sum. With --gpu-memory, also the peak GPU memory in use while it runs (nvidia-smi, all processes).
The command's own output passes through unchanged. With --pieces, the file in which a resumable
training (train-resumable, OUTPUT/training_pieces.json) records each call that trained it: the cost
is then the whole run's, wall and CPU time summed over its pieces and the largest peak RSS, with
each piece listed and the steps they cover; this call's own figures are kept as `this_call`, and the
--log keeps the output of every call a piece came from (each under a line of CALL_MARK), not this call's alone.

    python bench/run_cost.py --output results/train_pairatt_cost.json --log results/train_pairatt.log \
        -- python -m spacy train configs/parser_minilm.cfg --output training/pairatt
"""

import argparse
import contextlib
import json
import os
import resource
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacy_pairatt.reporting.json_files import json_text, write_json  # noqa: E402
from spacy_pairatt.reporting.provenance import code_at_start, provenance  # noqa: E402

CALL_MARK = "run_cost: a call began at "


def run(command, log: Optional[Path], resumable: bool) -> int:
    """Run `command`; with `log`, its output goes to the terminal and to `log` as it comes: in place of what
    `log` held, or for a `resumable` run after it, under a CALL_MARK line (keep_calls trims it at the end)."""
    if log is None:
        return subprocess.call(command)
    log.parent.mkdir(parents=True, exist_ok=True)
    with (
        log.open("a" if resumable else "w", encoding="utf8") as sink,
        subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf8",
            errors="replace",
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # a Python child would hold its output back
        ) as process,
    ):
        if resumable:
            sink.write(f"{CALL_MARK}{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n")
        for line in process.stdout:
            for stream in (sys.stdout, sink):
                stream.write(line)
                stream.flush()
        return process.wait()


class GPUMemoryPeak:
    """The GPU's largest used memory (MiB, all processes, as nvidia-smi reports it) while the command
    runs, polled every `interval` seconds in a thread; `baseline` is the reading before it starts."""

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.baseline = self.read()
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    @staticmethod
    def read() -> int:
        output = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "--id=0"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return int(output.split()[0])

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self.read())

    def __enter__(self) -> "GPUMemoryPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def keep_calls(log: Path, calls: int) -> None:
    """Keep the output of the last `calls` calls in `log`: those the run's pieces came from, not an earlier run's."""
    sections = log.read_text(encoding="utf8").split(CALL_MARK)[1:]
    log.write_text("".join(CALL_MARK + section for section in sections[-calls:]), encoding="utf8")


def whole_run(result: dict, pieces_path: Path) -> dict:
    """`result` (this call's cost) as the cost of the resumable run whose pieces `pieces_path` records."""
    if not pieces_path.is_file():
        raise SystemExit(f"run_cost: {pieces_path} not found: the command recorded no pieces (not train-resumable?)")
    pieces = json.loads(pieces_path.read_text(encoding="utf8"))
    if not pieces:
        raise SystemExit(f"run_cost: {pieces_path} records no piece of a training")
    this_call = {key: result[key] for key in ("wall_seconds", "peak_rss_mb", "cpu_seconds")}
    return {
        **result,
        "wall_seconds": round(sum(piece["wall_seconds"] for piece in pieces), 1),
        "peak_rss_mb": max(piece["peak_rss_mb"] for piece in pieces),
        "cpu_seconds": round(sum(piece["cpu_seconds"] for piece in pieces), 1),
        "steps": [pieces[0]["from_step"], pieces[-1]["to_step"]],
        "pieces": pieces,
        "this_call": this_call,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, help="results JSON to write when the command succeeds")
    parser.add_argument("--seed", type=int, help="the seed the command's result depends on, if any")
    parser.add_argument("--log", help="also write the command's output (stdout and stderr) to this file")
    parser.add_argument(
        "--gpu-memory", action="store_true", help="also record the peak GPU memory in use (nvidia-smi, GPU 0)"
    )
    parser.add_argument(
        "--pieces", help="a resumable training's record of its calls (train-resumable's OUTPUT/training_pieces.json)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    started = time.time()
    with GPUMemoryPeak() if args.gpu_memory else contextlib.nullcontext() as gpu:
        returncode = run(command, Path(args.log) if args.log else None, resumable=bool(args.pieces))
    if returncode != 0:
        print(
            f"run_cost: {shlex.join(command)} failed with exit status {returncode}; {args.output} not written",
            file=sys.stderr,
        )
        return returncode
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "command": shlex.join(command),
        "wall_seconds": round(time.time() - started, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        **({"gpu_peak_used_mb": gpu.peak, "gpu_used_mb_before": gpu.baseline} if gpu else {}),
        "provenance": provenance(seed=args.seed, started=started, command=shlex.join(command)),
    }
    if args.pieces:
        result = whole_run(result, Path(args.pieces))
        if args.log:
            keep_calls(Path(args.log), len(result["pieces"]))
    write_json(args.output, result)
    print(json_text({k: v for k, v in result.items() if k != "provenance"}))
    return 0


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    sys.exit(main())
