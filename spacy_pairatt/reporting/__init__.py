"""Results files and their text, light (no spaCy, torch or numba): json_files (reading and writing the
project's JSON), provenance (where a results file came from: commit, versions, command, seed, machine)
and tables (percentages, the markdown tables of evaluation results, marked blocks of README/docs).
Evaluation, scripts/ and the paper's project (its study, bench/ and docs_build/) stamp and print results with it."""
