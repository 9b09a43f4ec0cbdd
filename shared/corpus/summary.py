"""The global picture of a corpus run: per-word aggregates, a global SLALOM, one plot.

A token's value and importance are properties of one text's local fit. Across texts,
:func:`word_summary` gives each token its frequency and the mean, spread and standard error
of its scores (one observation per text it occurs in, so a word repeated in one review
counts once). :func:`global_slalom` fits the paper's *global* SLALOM over the corpus'
frequent tokens (one value and importance per token, on fresh short samples of them), and
:func:`compare_global_local` says how well the aggregate of local fits agrees with it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..fitting import get_fitter
from ..link import OutputLink, config_output_kind, resolve_output
from ..models import as_adapter
from ..models.fingerprint import model_fingerprint
from ..scores import SCORES, STORED_SCORES
from ..surrogate import SlalomSurrogate
from .loading import load_model
from .stored import CorpusRun

__all__ = [
    "word_summary",
    "WordStats",
    "top_words",
    "MIN_TEXTS",
    "cohort_matrix",
    "global_slalom",
    "compare_global_local",
    "plot_words",
    "SUMMARY_SCORES",
]

#: The scores aggregated per word (each in the units of the run's explained output, from
#: each text's base value; importance is unit-free and mean-zero within each text).
#: ``contribution`` is summed over a token's occurrences in a text (what the token adds to
#: that text's output), the others are per token and shared by its occurrences.
SUMMARY_SCORES = STORED_SCORES
#: The fewest texts a token must occur in to be among a run's top tokens: a mean over fewer
#: is one or two fits' noise, and rare tokens ("by", "has", "we") would top the list.
MIN_TEXTS = 5


def _per_text(score: str) -> str:
    """How one text's occurrences of a token combine: a token's own score is shared by its
    repeats ("first"); additive scores add up over them; other per-position scores average."""
    row = SCORES[score]
    return "first" if row.per == "token" else "sum" if row.additive else "mean"


def _positions(run):
    import pandas as pd

    if isinstance(run, pd.DataFrame):
        # A table from an older run (or built by hand) may name the explained class "label".
        if "explained_class" not in run.columns and "label" in run.columns:
            return run.rename(columns={"label": "explained_class"})
        return run
    if isinstance(run, (str, Path)):
        run = CorpusRun(run)
    return run.positions()


def _position_parts(run):
    """The positions table one chunk at a time (a table: itself, as one part)."""
    import pandas as pd

    if isinstance(run, pd.DataFrame):
        yield _positions(run)
        return
    run = CorpusRun(run) if isinstance(run, (str, Path)) else run
    for _, part in run.parts("positions"):
        yield part


class WordStats:
    """Per-token counts and score moments, gathered one chunk of a run at a time.

    Each chunk's (text, token) observations give per token a count, mean and sum of squared
    deviations per score; chunks combine exactly (Chan et al.'s pairwise update), so the
    summary of a run of any size needs one chunk's positions in memory, and equals the one
    of the whole table up to float rounding.

    Args:
        label: the explained class (None: the first text's, from the first chunk added).

    Example:
        >>> stats = WordStats()  # doctest: +SKIP
        >>> for _, part in run.parts("positions"):  # doctest: +SKIP
        ...     stats.add(part)
        >>> stats.summary(min_texts=5)  # doctest: +SKIP
    """

    def __init__(self, label: str | None = None) -> None:
        self.label = label
        self._frames: list = []
        self._pending = 0

    def add(self, pos) -> None:
        """Add one chunk's positions (whole texts: a text's positions are never split)."""
        pos = _positions(pos)
        if not len(pos):
            return
        if self.label is None:
            self.label = pos.sort_values(["id", "explained_class"], kind="stable")["explained_class"].iloc[0]
        pos = pos[pos["explained_class"] == self.label]
        scores = [s for s in SUMMARY_SCORES if s in pos.columns]
        # One observation per (text, token): repeats of a token in one text share its scores,
        # and their contributions add up.
        per_text = pos.groupby(["id", "token"], sort=False).agg(
            n=("position", "size"), **{s: (s, _per_text(s)) for s in scores}
        )
        grouped = per_text.groupby(level="token", sort=False)
        out = grouped.agg(n_texts=("n", "size"), n_occurrences=("n", "sum"))
        for s in scores:
            count = grouped[s].count()
            out[f"{s}__c"] = count
            out[f"{s}__m"] = grouped[s].mean().fillna(0.0)
            out[f"{s}__q"] = (grouped[s].var(ddof=0) * count).fillna(0.0)
        self._frames.append(out)
        self._pending += len(out)
        if self._pending > 200_000:  # keep memory at about the vocabulary's size
            self._frames = [self._combined()]
            self._pending = len(self._frames[0])

    def _combined(self):
        import pandas as pd

        df = pd.concat(self._frames)
        by = df.groupby(level=0, sort=True)
        out = by[["n_texts", "n_occurrences"]].sum()
        for s in [c[: -len("__c")] for c in df.columns if c.endswith("__c")]:
            c, m = df[f"{s}__c"], df[f"{s}__m"]
            total = c.groupby(level=0, sort=True).sum()
            mean = (c * m).groupby(level=0, sort=True).sum() / total.where(total > 0)
            spread = c * (m - mean.reindex(df.index).fillna(0.0).to_numpy()) ** 2
            out[f"{s}__c"], out[f"{s}__m"] = total, mean.fillna(0.0)
            out[f"{s}__q"] = df[f"{s}__q"].groupby(level=0, sort=True).sum() + spread.groupby(level=0, sort=True).sum()
        return out

    def summary(self, *, min_texts: int = 1, sort_by: str = "lin"):
        """The :func:`word_summary` table of everything added."""
        import pandas as pd

        if sort_by not in (*SUMMARY_SCORES, "n_texts"):
            raise ValueError(f"sort_by must be one of {(*SUMMARY_SCORES, 'n_texts')}, got {sort_by!r}")
        if not self._frames:
            # No text explained: an empty table of the usual columns and dtypes.
            cols = {"n_texts": "int64", "n_occurrences": "int64"}
            cols.update({f"{s}_{k}": "float64" for s in SUMMARY_SCORES for k in ("mean", "sd", "se")})
            index = pd.Index([], name="token", dtype=object)
            return pd.DataFrame({c: pd.Series(dtype=t, index=index) for c, t in cols.items()}, index=index)
        comb = self._combined()
        out = comb[["n_texts", "n_occurrences"]].copy()
        for s in [c[: -len("__c")] for c in comb.columns if c.endswith("__c")]:
            c = comb[f"{s}__c"]
            out[f"{s}_mean"] = comb[f"{s}__m"].where(c > 0)
            out[f"{s}_sd"] = np.sqrt(comb[f"{s}__q"] / (c - 1).where(c > 1))
            out[f"{s}_se"] = out[f"{s}_sd"] / np.sqrt(out["n_texts"])
        out = out[out["n_texts"] >= min_texts]
        key = out["n_texts"] if sort_by == "n_texts" else out[f"{sort_by}_mean"].abs()
        return out.loc[key.sort_values(ascending=False, kind="stable").index]


def word_summary(run, *, label: str | None = None, min_texts: int = 1, sort_by: str = "lin"):
    """Per token: in how many texts it occurs, and its scores' mean, s.d. and s.e. across them.

    A run is read one chunk at a time (:class:`WordStats`): the summary covers every text
    of a run of any size with one chunk's positions in memory.

    Args:
        run: a :class:`CorpusRun`, its path, or its positions table (DataFrame).
        label: the explained class to summarise (the ``explained_class`` column; default:
            the only one, or the first text's first).
        min_texts: keep tokens that occur in at least this many texts.
        sort_by: rank by the absolute mean of this score (any stored score, e.g. "lin",
            "contribution"), or "n_texts" (most frequent first).

    Returns:
        A DataFrame indexed by token with columns ``n_texts``, ``n_occurrences`` and, per
        score, ``<score>_mean``, ``<score>_sd`` (across texts, ddof=1) and ``<score>_se``
        (sd / sqrt(n_texts); NaN for a token seen in one text).

    Example:
        >>> word_summary(run, min_texts=5).head(20)  # doctest: +SKIP
    """
    if sort_by not in (*SUMMARY_SCORES, "n_texts"):
        raise ValueError(f"sort_by must be one of {(*SUMMARY_SCORES, 'n_texts')}, got {sort_by!r}")
    stats = WordStats(label)
    for part in _position_parts(run):
        stats.add(part)
    return stats.summary(min_texts=min_texts, sort_by=sort_by)


def top_words(run, *, top: int = 30, min_texts: int = MIN_TEXTS, label: str | None = None):
    """A run's top tokens, by the one rule that the report's ``words.html`` and
    ``words.png`` and ``slalom-xai summarize`` share: tokens seen in at least ``min_texts``
    texts, ranked by the absolute mean over those texts of their ``contribution`` (what the
    token added to each text's prediction, summed over its repeats there).

    Contribution, not ``lin`` or value: a token's value can be large while the text gives
    it little weight, so its lin tops a list though it moved no prediction.

    Args:
        run: a :class:`CorpusRun`, its path, its positions table, or a :func:`word_summary`
            table (one with an ``n_texts`` column).
        top: how many tokens.
        min_texts: only tokens seen in at least this many texts (:data:`MIN_TEXTS`).
        label: the explained class (default: the run's first).

    Returns:
        The :func:`word_summary` rows of the top tokens, in rank order.

    Example:
        >>> top_words(run, top=20).index.tolist()  # doctest: +SKIP
    """
    import pandas as pd

    if isinstance(run, pd.DataFrame) and "n_texts" in run.columns:
        summary = run
    else:
        summary = word_summary(run, label=label, min_texts=1, sort_by="contribution")
    keep = summary[summary["n_texts"] >= int(min_texts)]
    key = keep["contribution_mean"].abs()
    return keep.loc[key.sort_values(ascending=False, kind="stable").index].head(int(top))


def cohort_matrix(run, *, score: str = "contribution", top: int = 30, min_texts: int = 3, label: str | None = None):
    """Texts × tokens matrix of one score for the ``top`` tokens of largest mean |score|.

    Tokens are ranked by the mean over the texts they occur in of |their score in that
    text|, among tokens seen in at least ``min_texts`` texts, so a frequent but neutral
    token ("the", ".") does not crowd out the ones that move the output, and a token seen
    once does not rank on one fit. Entry (i, j) is text i's score for token j: for
    ``value``, ``importance`` and ``lin`` the token's score in that text (repeats share it),
    for ``contribution`` and ``removal`` the sum over its occurrences; 0 where the token
    does not occur (it contributes nothing). ``counts`` holds the occurrences, ``base``
    each text's base value.

    Args:
        run: a :class:`CorpusRun` or its path.
        score: "contribution" (default), "value", "importance", "lin" or "removal".
        top: how many tokens.
        min_texts: only tokens seen in at least this many texts.
        label: the explained class (default: the run's first).

    Returns:
        ``(ids, tokens, values, counts, base)``: lists of ids and tokens, (n_texts, top)
        arrays of the score and of the counts, and the (n_texts,) base values.

    Example:
        >>> ids, tokens, values, counts, base = cohort_matrix(run, score="contribution", top=20)  # doctest: +SKIP
    """
    if score not in SUMMARY_SCORES:
        raise ValueError(f"score must be one of {tuple(SUMMARY_SCORES)}, got {score!r}")
    run = CorpusRun(run) if isinstance(run, (str, Path)) else run
    pos = run.positions()
    label = pos["explained_class"].iloc[0] if label is None and len(pos) else label
    pos = pos[pos["explained_class"] == label]
    agg = pos.groupby(["id", "token"]).agg(
        n=("position", "size"), x=(score, "sum" if SCORES[score].per == "position" else "first")
    )
    by_token = agg["x"].abs().groupby(level="token").agg(["size", "mean"])
    by_token = by_token[by_token["size"] >= min_texts]
    tokens = list(by_token["mean"].sort_values(ascending=False, kind="stable").head(top).index)
    texts = run.texts()
    texts = texts[texts["explained_class"] == label]
    ids = list(texts["id"])
    row = {t: i for i, t in enumerate(ids)}
    col = {t: j for j, t in enumerate(tokens)}
    values = np.zeros((len(ids), len(tokens)))
    counts = np.zeros((len(ids), len(tokens)), dtype=np.int64)
    for (text_id, tok), r in agg[agg.index.get_level_values("token").isin(tokens)].iterrows():
        values[row[text_id], col[tok]] = r["x"]
        counts[row[text_id], col[tok]] = r["n"]
    return ids, tokens, values, counts, texts["base_value"].to_numpy(dtype=np.float64)


def global_slalom(
    model: object,
    run,
    tokenizer: object | None = None,
    *,
    top: int = 200,
    min_texts: int = 2,
    n_samples: int = 20_000,
    sample_length: int = 2,
    output: str = "auto",
    target: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    device=None,
    **fit_options,
):
    """The paper's global SLALOM over the corpus' ``top`` most frequent tokens.

    The "text" is the vocabulary: SLALOM-eff draws ``n_samples`` random sequences of
    ``sample_length`` of these tokens, the model scores them (its special tokens added),
    and one value and importance per token are fitted to their log-odds measured from the
    model's output on the empty input (as the local fits' ``base_value``).

    Args:
        model, tokenizer: the run's model (anything :func:`explain_corpus` takes).
        run: a :class:`CorpusRun` or its path (its positions table gives the vocabulary).
        top: how many tokens, the most frequent by number of texts.
        min_texts: only tokens seen in at least this many texts.
        n_samples: model evaluations for the fit.
        **fit_options: options of the eff fitter (e.g. ``prior_sd=None`` for plain least
            squares, the paper's global fit).

    Returns:
        A DataFrame indexed by token: ``value``, ``importance``, ``value_se``,
        ``importance_se``, ``n_texts``; its ``attrs`` hold the fit's diagnostics.

    Example:
        >>> g = global_slalom(model, run, tokenizer=tok, top=100)  # doctest: +SKIP
    """
    import pandas as pd

    model, tokenizer = load_model(model, tokenizer)
    check_run_model(run, model, tokenizer)
    summary, units = _vocabulary(run, top, min_texts)
    adapter = as_adapter(model, tokenizer, batch_size=batch_size, device=device)
    fitter = get_fitter("eff", sample_length=sample_length, **fit_options)
    n_units = len(units)

    def token_ids(samples) -> list[list[int]]:
        return [[i for u in s.tolist() for i in units[u]] for s in samples]

    with adapter.session():
        gen = fitter.run(np.random.default_rng(seed), np.arange(n_units), n_units, int(n_samples))
        samples = next(gen)
        raw = adapter.score([[]] + token_ids(samples))
        kind, how, _ = resolve_output(output, raw, config_output_kind(adapter), adapter.output_dtype)
        link = OutputLink(raw.shape[1], kind, target, adapter.class_names, "joint")
        y = link.transform(raw).numpy().reshape(raw.shape[0], -1)
        base, y = y[0], y[1:] - y[0]
        evaluations = raw.shape[0]
        try:
            while True:
                samples = gen.send(y)
                raw = adapter.score(token_ids(samples))
                evaluations += raw.shape[0]
                y = link.transform(raw).numpy().reshape(raw.shape[0], -1) - base
        except StopIteration as stop:
            fit = stop.value
    value = fit.value[:, 0] if fit.value.shape[1] == 1 else fit.value[:, link.column or 0]
    surrogate = SlalomSurrogate(value, fit.importance)  # importances made mean-zero
    out = pd.DataFrame(
        {
            "value": surrogate.value,
            "importance": surrogate.importance,
            "value_se": np.nan if fit.value_se is None else fit.value_se[:, 0],
            "importance_se": np.nan if fit.importance_se is None else fit.importance_se,
            "n_texts": summary["n_texts"].to_numpy(),
        },
        index=summary.index,
    )
    out.attrs.update(fit.diagnostics, base_value=float(base.ravel()[0]), model_evaluations=evaluations, output=how)
    return out


def _vocabulary(run, top: int, min_texts: int):
    """The global fit's "text": the run's ``top`` tokens by number of texts (at least
    ``min_texts``), with their word summary and each one's token ids as first seen."""
    pos = _positions(run)
    summary = word_summary(pos, min_texts=min_texts, sort_by="n_texts").head(top)
    if len(summary) < 2:
        raise ValueError(f"the run has {len(summary)} token(s) in at least {min_texts} texts; a global fit needs 2")
    first_ids = pos.drop_duplicates("token").set_index("token")["token_ids"]
    return summary, [tuple(int(i) for i in first_ids[t]) for t in summary.index]


def check_run_model(run, model: object, tokenizer: object | None) -> None:
    """Raise unless ``model`` (loaded) is the model ``run`` was explained with (its manifest's fingerprint).

    A global fit of another model would not describe the run. A table (not a run) carries
    no fingerprint and is not checked.

    Example:
        >>> check_run_model("runs/imdb", model, tok)  # doctest: +SKIP
    """
    import pandas as pd

    if isinstance(run, pd.DataFrame):
        return
    run = CorpusRun(run) if isinstance(run, (str, Path)) else run
    recorded = (getattr(run, "manifest", None) or {}).get("model")
    if not isinstance(recorded, dict) or "digest" not in recorded:
        return  # an older run, recorded without a fingerprint
    mine = model_fingerprint(model, tokenizer)
    if mine["digest"] != recorded["digest"]:
        raise ValueError(
            f"{str(run.path)!r} was explained with the model {recorded.get('name')!r} ({recorded.get('class')}, "
            f"fingerprint {recorded['digest']}), this one is {mine['class']} (fingerprint {mine['digest']}): a "
            "global fit of another model would not describe the run; give the run's own model"
        )


def compare_global_local(global_fit, run, *, label: str | None = None) -> dict:
    """Spearman rank correlation between the global fit and the mean local scores per token.

    Returns ``{"value": rho, "importance": rho, "n_tokens": n}`` over the tokens of
    ``global_fit``. High value agreement says local fits describe what the model does with
    a token everywhere; low importance agreement is expected where importances depend on
    context (the paper's point about non-additive models).

    Example:
        >>> compare_global_local(global_slalom(model, run, tokenizer=tok), run)  # doctest: +SKIP
    """
    local = word_summary(run, label=label).reindex(global_fit.index)

    return {
        # pandas ranks ties by their mean rank and skips tokens missing on either side.
        "value": float(global_fit["value"].corr(local["value_mean"], method="spearman")),
        "importance": float(global_fit["importance"].corr(local["importance_mean"], method="spearman")),
        "n_tokens": len(global_fit),
    }


def plot_words(summary, *, top: int = 25, fig=None):
    """Value against importance for the first ``top`` tokens of ``summary`` (±1 s.e. bars),
    and their mean contributions from the most negative to the most positive.

    The tokens are the table's first rows: give it :func:`top_words` (as the report and
    ``slalom-xai summarize`` do), so the picture and the tables show the same tokens.

    Args:
        summary: a :func:`word_summary` table, ranked (e.g. by :func:`top_words`).
        top: tokens in each panel.
        fig: a matplotlib Figure to draw on (default: a new 12 × 5 in figure).

    Returns:
        The Figure.

    Raises:
        ValueError: ``summary`` has no row (nothing to plot).

    Example:
        >>> plot_words(top_words(run, top=25)).savefig("corpus.png")  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    if not len(summary):
        raise ValueError(
            "the word summary is empty (no text of the run was explained, or no token occurs in min_texts texts): "
            "there is nothing to plot"
        )
    if fig is None:
        fig = plt.figure(figsize=(12, 5))
    ax_scatter, ax_bar = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    head = summary.head(top)
    ax_scatter.errorbar(
        head["value_mean"],
        head["importance_mean"],
        xerr=head["value_se"].fillna(0),
        yerr=head["importance_se"].fillna(0),
        fmt="none",
        ecolor="0.7",
        lw=1,
    )
    c = head["contribution_mean"]
    colors = plt.cm.coolwarm(0.5 + 0.5 * np.tanh(c / max(c.abs().max(), 1e-12)))
    ax_scatter.scatter(head["value_mean"], head["importance_mean"], s=12 + 4 * np.sqrt(head["n_texts"]), c=colors)
    for tok, r in head.iterrows():
        ax_scatter.annotate(str(tok), (r["value_mean"], r["importance_mean"]), fontsize=8, xytext=(3, 3),
                            textcoords="offset points")  # fmt: skip
    ax_scatter.axvline(0, color="0.85", lw=0.8, zorder=0)
    ax_scatter.set_xlabel("value (log-odds from the base value), mean over texts ± s.e.")
    ax_scatter.set_ylabel("importance (mean-zero log-weight), mean ± s.e.")
    ax_scatter.set_title(f"The {len(head)} top tokens (colour: mean contribution; size: texts)")
    ends = head.sort_values("contribution_mean", kind="stable")
    ax_bar.barh(range(len(ends)), ends["contribution_mean"], xerr=ends["contribution_se"].fillna(0),
                color=["#3b6fb6" if x < 0 else "#c0392b" for x in ends["contribution_mean"]])  # fmt: skip
    ax_bar.set_yticks(range(len(ends)), [str(t) for t in ends.index], fontsize=8)
    ax_bar.axvline(0, color="0.5", lw=0.8)
    # Two lines each: on one, the narrow panel's title and label ran past the figure's right edge.
    ax_bar.set_xlabel("contribution (log-odds added to the text),\nmean over texts ± s.e.")
    ax_bar.set_title("What the top tokens added,\nmost negative to most positive")
    fig.tight_layout()
    return fig
