"""SLALOM's surrogate interactions beside shapiq's approximators on the model itself.

One review, the packaged MiniLM demo model (offline), 1 torch thread (``--threads``). The
reference is the model's own exact SII (all 2^n deletions, shapiq's ExactComputer on the
model game: the text with the absent tokens deleted, log-odds of class 1, the empty text as
F(∅)); SLALOM's row is ``exp.to_interaction_values()`` after one fit; KernelSHAP-IQ and
SVARM-IQ get the fit's number of model calls as their budget (the game and approximators of
:mod:`slalom_core.experiments.shapiq_games`, as in ``slalom-xai bench``). Needs shapiq
(``pip install "slalom-xai[shapiq]"``).

    python -m slalom_core.experiments.benchmarks.shapiq_compare --threads 1
"""

import argparse
import time
import warnings

import numpy as np
import torch

from .machine import machine_line


def main(argv: list[str] | None = None) -> None:
    """Print the comparison table, with the machine and the load before and after the run.

    Example:
        >>> main(["--threads", "1"])  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch threads (%(default)s)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    print(f"machine before: {machine_line()}")
    import slalom_core as sc
    from slalom_core.experiments.shapiq_games import APPROXIMATORS, approximate, deletion_game, require_shapiq
    from slalom_core.packaged.demo_model import load_default_model

    shapiq = require_shapiq()

    model, tok = load_default_model()
    text = "a wonderful, moving film with a boring plot"
    start = time.perf_counter()
    exp = sc.explain(model, text, tokenizer=tok, seed=0, n_samples=500)
    fit_s = time.perf_counter() - start
    n, calls = exp.n_positions, int(exp.diagnostics.model_evaluations)
    start = time.perf_counter()
    iv = exp.to_interaction_values(max_order=2)
    iv_s = time.perf_counter() - start
    ids = [i[0] for i in exp.token_ids]
    adapter = sc.models.as_adapter(model, tokenizer=tok)

    def log_odds(rows: list[list[int]]) -> np.ndarray:
        out = adapter.score(rows).numpy()
        return out[:, 1] - out[:, 0]  # log-odds of class 1, as SLALOM explains the binary model

    model_game = deletion_game(log_odds, ids)  # the same game as `slalom-xai bench`'s shapiq rows
    estimates = {}
    with adapter.session():
        start = time.perf_counter()
        truth = shapiq.ExactComputer(n_players=n, game=model_game)("SII", order=2)
        exact_s = time.perf_counter() - start
        for key, name in APPROXIMATORS.items():
            start = time.perf_counter()
            est = approximate(key, model_game, n, calls, seed=0)
            estimates[name] = (est, time.perf_counter() - start)
    singles = [c for c in truth.interaction_lookup if len(c) == 1]
    pairs = [c for c in truth.interaction_lookup if len(c) == 2]

    def rmse(a, cs):
        return float(np.sqrt(np.mean([(a[c] - truth[c]) ** 2 for c in cs])))

    def corr(a, cs):
        return float(np.corrcoef([a[c] for c in cs], [truth[c] for c in cs])[0, 1])

    print(
        f"{text!r}: n={n} positions; f(x)={float(exp.model_output):.3f}, b={float(exp.base_value):.3f}, "
        f"F(x)={float(exp.surrogate_output):.3f}; SD of the model's pair SII {np.std([truth[c] for c in pairs]):.3f}"
    )
    print(f"the model's exact SII (reference): {2**n} model calls, {exact_s:.2f} s")
    print("| method | model calls | seconds | RMSE order 1 | RMSE order 2 | corr. order 2 |")
    print("| --- | --- | --- | --- | --- | --- |")
    row = f"{rmse(iv, singles):.3f} | {rmse(iv, pairs):.3f} | {corr(iv, pairs):.2f}"
    print(f"| SLALOM fit + to_interaction_values | {calls} | {fit_s:.2f} + {iv_s:.3f} | {row} |")
    for name, (est, seconds) in estimates.items():
        row = f"{rmse(est, singles):.3f} | {rmse(est, pairs):.3f} | {corr(est, pairs):.2f}"
        print(f"| shapiq {name} on the model | {calls} | {seconds:.2f} | {row} |")
    print(f"machine after: {machine_line()}")


if __name__ == "__main__":
    main()
