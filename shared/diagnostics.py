"""What one explanation cost and how well it fits: :class:`Diagnostics`."""

from __future__ import annotations

from typing import Any

__all__ = ["Diagnostics", "CORE_FIELDS", "IMPORTANCE_MEASURED", "MIN_MOVE", "direction_check"]

#: Below this move from the reference point (log-odds, or the norm of the centred logits'
#: move) the model's output on a text has no direction worth checking: a hundredth of the
#: odds' range that a confident classifier spans (±5 log-odds) is noise next to sampling error.
MIN_MOVE = 0.1

#: What a method's importances measure, by the samples they were fitted to (the core field
#: ``importance_measured`` holds the key; pages print the sentence). A transformer weighs a
#: token differently beside two others than inside the review (docs/results.md), so a user
#: must know which of the two the importances describe.
IMPORTANCE_MEASURED: dict[str, str] = {
    "in context": "measured in this text (deletions of the text)",
    "alone": "measured for each token alone (samples of a few tokens), not in this text",
    # Written by releases before the length law (their default's); read back from their files.
    "alone, scaled in context": (
        "measured for each token alone (samples of a few tokens), carried into this text by a "
        "temperature fitted to its deletions"
    ),
    "alone and in context": "one fit to short samples and deletions of the text together",
    "prior from the values": (
        "partly not measured: where the short samples leave them open, a prior centred on a slope of |value| sets them"
    ),
    "predicted": "predicted by an amortized head trained on per-text fits, not measured for this text",
}


class Diagnostics(dict):
    """The diagnostics of one explanation: a ``dict`` whose entries are also typed attributes.

    ``explain_batch`` sets the core fields below on every explanation; the fitter adds its
    own entries (:attr:`extras`), e.g. ``heldout_r2``, ``heldout_mse``, ``n_heldout``,
    ``train_r2``, ``fit_converged``, ``fit_iterations`` (eff, fidel, hybrid), ``check_r2``
    (with ``check_samples``), ``design``, ``n_context``, ``value_scale``, ``value_shift``,
    ``length_exponent``, ``length_curvature``, ``length_pivot``, ``scales_r2``,
    ``importance_gain`` (1 − RSS/RSS with equal importances on the text's context samples:
    ≤ 0 where the importances do not help in this text) and ``heldout_r2_of`` (hybrid),
    ``ana_invalid_pairs`` (ana).

    A ``dict`` subclass, so that code written for the plain dict this used to be keeps
    working: ``d["heldout_r2"]``, ``d.get(...)``, ``"x" in d``, ``dict(d)``, iteration,
    ``d.update``, item assignment, pickling and ``json.dumps`` (values permitting; see
    :meth:`SlalomExplanation.to_dict`). Every entry is also an attribute,
    ``d.heldout_r2 == d["heldout_r2"]`` (but for names a ``dict`` method already takes, such
    as ``items``), and setting an attribute sets the entry. A core field that was never set
    reads None (an explanation not made by ``explain_batch``); any other missing name raises
    AttributeError.

    Attributes:
        method: the fitting method's name ("eff-slope", "eff", "fidel", "ana", "hybrid").
        seed: the seed this text's samples were drawn with (reproduces the explanation).
        n_samples: the samples the fit asked for (ana: 2U − 1 for U unique units).
        n_positions: positions of the text (tokens, or words at word granularity).
        n_units: unique units among them (repeated tokens share one).
        model_evaluations: model calls made for this text, its full text included; the
            empty input (scored once per call) is booked on the call's first text.
        tokens_evaluated: tokens the model read for them (special tokens included).
        model_seconds: this text's share of the model's time (by tokens read; the empty
            input's on the first text, with its evaluation).
        fit_seconds: time spent fitting this text (its share of batched fits).
        total_seconds: model_seconds + fit_seconds.
        reference: "empty input" (scored) or "given" (a ``reference=`` number).
        output: how the raw outputs were read and how that was decided, e.g.
            "probs (detected)".
        class_names: the names of the model's outputs where it has them (a Hugging Face
            config's ``id2label``), also for a binary model whose fit is one log-odds column.
        output_kind: what they were read as, an ``OUTPUT_KINDS`` entry (to pass as
            ``output=`` to later calls).
        n_outputs: K, the raw outputs per input the model returned (2 for a binary model
            with two logits, 1 for one logit): what an explanation of every class reads.
        prior_sd: the sd of the prior on the importances (the one chosen, with
            ``prior_sd="evidence"``); None for a fit without a prior.
        model_output: the model's output on the full text (log-odds, or centred logits).
        surrogate_output: the surrogate's output on the full text.
        full_text_gap: model_output − surrogate_output.
        direction_agrees: whether the surrogate moves from ``base_value`` the way the model
            does on the text (the two moves point the same way: same sign, or for several
            classes a positive dot product); None where the model's own move is below
            ``MIN_MOVE`` log-odds, too small for a direction to mean anything.
        reproduced: the share of the model's move that the surrogate reproduces, along the
            model's direction: (surrogate − base)·(model − base) / |model − base|² (1: the
            surrogate meets the model; 0: it explains none of the move; negative: it points
            the other way); None where the model barely moves (as above).
        units_determined: the text's unique tokens whose importance the data determine
            (:attr:`~slalom_core.SlalomExplanation.importance_determined`); None for a method
            without standard errors. Recorded so that a corpus run's texts table can be
            judged by the fit-quality rule (:mod:`slalom_core.fit_quality`) without its positions.
        importance_measured: what the importances measure, a key of
            :data:`IMPORTANCE_MEASURED` ("in context": fitted to deletions of this text;
            "alone": to samples of a few tokens each; ...), from the fitter's samples.
        api_usage: what the whole call cost a model billed per call (calls, cache hits,
            input tokens, retries, the estimate); None for any other model.
        truncated_positions: positions cut off the text's end to fit the model, with
            ``truncate=True`` (0: none were); None where the call did not cut.

    Example:
        >>> d = Diagnostics(method="eff", model_evaluations=102, heldout_r2=0.93)
        >>> d.model_evaluations == d["model_evaluations"], d.heldout_r2
        (True, 0.93)
        >>> d.extras, d.api_usage
        ({'heldout_r2': 0.93}, None)
        >>> import json; json.dumps(d)
        '{"method": "eff", "model_evaluations": 102, "heldout_r2": 0.93}'
    """

    # No instance __dict__: every attribute is an entry of the mapping.
    __slots__ = ()

    method: str
    seed: int
    n_samples: int
    n_positions: int
    n_units: int
    model_evaluations: int
    tokens_evaluated: int
    model_seconds: float
    fit_seconds: float
    total_seconds: float
    reference: str
    output: str
    output_kind: str
    n_outputs: int
    class_names: list[str] | None
    prior_sd: float | None
    model_output: Any  # float, or one per class (np.ndarray)
    surrogate_output: Any
    full_text_gap: Any
    direction_agrees: bool | None
    reproduced: float | None
    units_determined: int | None
    importance_measured: str | None
    api_usage: dict | None
    truncated_positions: int | None

    def __getattr__(self, name: str) -> Any:
        # Called only when ordinary lookup fails: the entries, then the unset core fields.
        try:
            return self[name]
        except KeyError:
            if name in CORE_FIELDS:
                return None
            raise AttributeError(f"these diagnostics have no {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {k for k in self if isinstance(k, str)} | set(CORE_FIELDS))

    @property
    def extras(self) -> dict[str, Any]:
        """The fitter's own entries: every entry but the core fields."""
        return {k: v for k, v in self.items() if k not in CORE_FIELDS}

    def copy(self) -> Diagnostics:
        """A shallow copy, still a :class:`Diagnostics` (``dict(d)`` gives a plain dict)."""
        return Diagnostics(self)


#: The fields ``explain_batch`` sets on every explanation (``api_usage`` only for a billed model).
CORE_FIELDS: tuple[str, ...] = tuple(Diagnostics.__annotations__)


def direction_check(model_output: Any, surrogate_output: Any, base_value: Any) -> tuple[bool | None, float | None]:
    """(direction_agrees, reproduced) of one explanation; see :class:`Diagnostics`.

    Example:
        >>> direction_check(3.0, 1.5, 1.0)
        (True, 0.25)
        >>> direction_check(3.0, 0.5, 1.0)
        (False, -0.25)
    """
    import numpy as np  # kept local: the module is otherwise free of numpy

    move = np.ravel(np.asarray(model_output, dtype=float) - np.asarray(base_value, dtype=float))
    fitted = np.ravel(np.asarray(surrogate_output, dtype=float) - np.asarray(base_value, dtype=float))
    size = float(np.dot(move, move))
    if not np.isfinite(size) or np.sqrt(size) < MIN_MOVE:
        return None, None
    along = float(np.dot(fitted, move))
    return bool(along > 0), along / size
