"""The experiment harness around the engine: evaluation, baselines, benchmarks, the paper's
experiments, synthetic ground truth, the demo models, data lookup and the command line.

Nothing in the engine core (``slalom_core`` outside this sub-package) imports from here;
``tests/engine/test_layout.py`` walks the core's syntax trees to keep it so.
"""
