"""Benchmarks, each runnable as ``python -m slalom_core.experiments.benchmarks.<name>``.

They print timings and write JSON; none of them is a test (timings depend on the machine).
The figures they produced are in ``docs/results.md`` with the command next to each.
"""
