"""The property test (random text, random tokenisations and sentence starts -> no exception, one
tree per sentence) with more examples than CI runs; writes what ran, the outcome and the time.

    python bench/robustness.py --examples 10000 --output results/bench_robustness.json
"""

import argparse
import os
import subprocess
import sys
import time

from spacy_pairatt.reporting.json_files import write_json

TEST = "tests/test_robustness.py::test_random_text_and_tokenizations_give_one_tree_per_sentence"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--output", default="results/bench_robustness.json")
    args = parser.parse_args()
    env = {**os.environ, "PAIRATT_HYPOTHESIS_EXAMPLES": str(args.examples)}
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST], env=env)
    result = {
        "test": TEST,
        "examples": args.examples,
        "passed": run.returncode == 0,
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(write_json(args.output, result))
    sys.exit(run.returncode)


if __name__ == "__main__":
    main()
