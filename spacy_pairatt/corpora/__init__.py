"""Data sets: where to get them, how to read them, and each benchmark's official metric
(relation_metrics: SemEval-2010 Task 8 and Re-DocRED)."""
