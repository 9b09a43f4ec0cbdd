"""Models that ship with the package, for the demo, tests and benchmarks: no download.

- :mod:`.demo_model`: the default demo model, the packaged all-MiniLM-L6-v2 encoder with a
  small low-rank adapter trained for IMDB sentiment (``load_default_model``);
- :mod:`.zeroshot`: the same encoder as a zero-shot sentiment classifier (no training).

How the adapter was trained lives in the harness (``slalom_core.experiments.train_demo_model``).
"""
