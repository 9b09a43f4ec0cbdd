"""``AmortizedExplainer``: SLALOM explanations at the cost of one forward pass per text.

Fitted once on a corpus run (the per-text fits are its labels), a small head on the model's
own hidden states predicts each token's value and importance. The explanations it returns
are :class:`~slalom_core.SlalomExplanation` objects like the per-text ones: the derived
scores (lin, contribution, removal, shapley) come from the predicted v and s through the
same score functions, measured from the same reference point (the model's output on the
empty input).
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..api import explain_batch as per_text_explain_batch
from ..corpus import CorpusRun
from ..diagnostics import Diagnostics
from ..explanation import SlalomExplanation
from ..link import OutputLink, warn_user
from ..models import Segmentation, as_adapter
from ..models.fingerprint import model_fingerprint
from ..surrogate import SlalomSurrogate
from .audit import AmortizedFewTextsWarning, AmortizedOODWarning, AuditReport, agreement, ood_check
from .features import check_encoder, encode, head_input
from .head import EPOCHS, HIDDEN, AmortizedHead, pool_units
from .law import law_meeting_output, typical_law
from .saved import check_finite, read_head, write_head
from .sizes import AUDIT_SAMPLES
from .training import MEASURED_MIN_TEXTS, read_labels, train_head

__all__ = ["AmortizedExplainer", "FORMAT", "METHOD"]

#: The saved format's name and version (``config.json``).
FORMAT = "slalom-amortized/1"
#: ``diagnostics["method"]`` and ``explanation.method`` of an amortized explanation.
METHOD = "amortized"


class AmortizedExplainer:
    """Learn a model's SLALOM explanations from a corpus run; explain new texts in one pass.

    Args:
        model: a Hugging Face sequence classifier (binary); frozen, never trained.
        tokenizer: its tokenizer.
        hidden: width of the head's MLP (at least 1). Default: 256.
        epochs: training passes over the run's texts (at least 1; the epoch with the best
            validation loss is kept). Default: 60.
        lr: the head's learning rate (positive). Default: 1e-3.
        batch_size: texts per forward pass (at least 1). Default: None, 4 on a CPU and 32 on
            a GPU (:func:`~.features.default_batch_size`: the fastest measured on each).
        max_unseen: the share (0 to 1) of a text's tokens unseen in training above which the
            text is flagged as out of distribution. Default: 0.25.
        seed: the head's initialisation and training order. Default: 0.

    Raises:
        ValueError: an option out of its range (the message names it).

    Example:
        >>> amortized = AmortizedExplainer(model, tok).fit("runs/imdb-train")  # doctest: +SKIP
        >>> exp = amortized.explain("a gripping, beautifully shot film")  # doctest: +SKIP
        >>> exp.diagnostics["method"], exp.contribution.sum() + exp.base_value  # doctest: +SKIP
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: object | None = None,
        *,
        hidden: int = HIDDEN,
        epochs: int = EPOCHS,
        lr: float = 1e-3,
        batch_size: int | None = None,
        max_unseen: float = 0.25,
        seed: int = 0,
    ) -> None:
        sizes = (("hidden", hidden), ("epochs", epochs)) + (
            (("batch_size", batch_size),) if batch_size is not None else ()
        )
        for name, value in sizes:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be an int of at least 1, got {value!r}")
        if not (isinstance(lr, numbers.Real) and math.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be a positive number, got {lr!r}")
        if not (isinstance(max_unseen, numbers.Real) and 0.0 <= max_unseen <= 1.0):
            raise ValueError(f"max_unseen must be a share in [0, 1], got {max_unseen!r}")
        self.model, self.tokenizer = model, tokenizer
        self.adapter = check_encoder(as_adapter(model, tokenizer))
        self.hidden, self.epochs, self.lr, self.seed = int(hidden), int(epochs), float(lr), int(seed)
        self.batch_size = None if batch_size is None else int(batch_size)
        self.max_unseen = float(max_unseen)
        self.fingerprint = model_fingerprint(model, self.adapter.tokenizer)
        self.head: AmortizedHead | None = None
        self.config: dict = {}
        self._vocabulary: set[int] = set()
        self._base: tuple[np.ndarray, OutputLink] | None = None
        self.last_audit: AuditReport | None = None
        #: The folder this explainer was loaded from or last saved to (None: never saved).
        self.path: Path | None = None

    # -- training ------------------------------------------------------------------------
    def fit(self, run: CorpusRun | str | Path) -> AmortizedExplainer:
        """Train the head on a corpus run made with this model (its ``positions`` table).

        Args:
            run: a :class:`~slalom_core.corpus.CorpusRun` or its folder. Refused (ValueError,
                with the reason) when made with another model or tokenizer, or, once this
                explainer holds a head, with another method or output reading; or when too
                small, multi-class, at word granularity or with another reference point.

        Returns:
            ``self``, trained. A run of fewer texts than :data:`MEASURED_MIN_TEXTS` (the
            fewest measured in docs/amortized.md) trains with an :class:`AmortizedFewTextsWarning`.
        """
        trained = self.config.get("trained_on", {})
        run = run if isinstance(run, CorpusRun) else CorpusRun(run)
        labels = read_labels(
            run, digest=self.fingerprint["digest"], expect={k: trained.get(k) for k in ("method", "output")}
        )
        if len(labels.ids) < MEASURED_MIN_TEXTS:
            warn_user(
                f'training on {len(labels.ids)} texts: the fewest measured (docs/amortized.md, "How many '
                f'labels") are {MEASURED_MIN_TEXTS} texts, whose head agreed with 1,000-sample per-text fits at '
                "value Spearman 0.90; a head trained on fewer is untested and likely worse: explain more texts "
                "per text first",
                AmortizedFewTextsWarning,
            )
        features = [head_input(h) for h in encode(self.adapter, labels.sequences, batch_size=self.batch_size).hidden]
        head, report = train_head(features, labels, hidden=self.hidden, epochs=self.epochs, lr=self.lr, seed=self.seed)
        # A diverged training gives NaN scores for every text: refused here, not at explain time.
        check_finite(head.state_dict(), "the trained amortized head")
        lengths = [len(s) for s in labels.sequences]
        texts = run.texts()
        self.head = head
        self._vocabulary = {i for s in labels.sequences for i in s}
        self.config = {
            "format": FORMAT,
            "head": {"n_layers": head.n_layers, "width": head.width, "hidden": head.hidden},
            "model": self.fingerprint,
            "tokenizer": _tokenizer_info(self.adapter.tokenizer),
            "trained_on": labels.meta,
            "training": report,
            "ood": {"length_range": [min(lengths), max(lengths)], "max_unseen": self.max_unseen},
            # The head predicts v and s; the length law is the label fits' typical one (.law).
            "law": typical_law(texts[texts["id"].astype(str).isin(labels.ids)]),
        }
        return self

    # -- explaining ----------------------------------------------------------------------
    def explain(self, text: str) -> SlalomExplanation:
        """One text's amortized explanation (see :meth:`explain_batch`)."""
        if not isinstance(text, str):
            raise TypeError(f"explain takes one text (a str), got {type(text).__name__}; use explain_batch for a list")
        return self.explain_batch([text])[0]

    def explain_batch(
        self,
        texts: Sequence[str],
        *,
        truncate: bool = True,
        audit: float = 0.0,
        audit_samples: int = AUDIT_SAMPLES,
        audit_seed: int = 0,
    ) -> list[SlalomExplanation]:
        """Amortized explanations of texts: one forward pass of the model per text.

        Args:
            texts: the texts (each checked like a per-text explanation's: an empty text
                raises the same error), or their token segmentations (explained as given).
            truncate: cut a text longer than the model accepts to its first tokens, as
                ``slalom-xai explain`` and :func:`~slalom_core.corpus.explain_corpus` cut it
                (:meth:`~slalom_core.models.ModelAdapter.segment_within_length`; the count
                cut is ``diagnostics["truncated_positions"]``); False raises the per-text
                error instead. Default: True.
            audit: share of the texts (0 to 1) to also fit per text with the training run's
                method at ``audit_samples``; each audited explanation gets
                ``diagnostics["audit"]`` (Spearman of value and importance), and
                :attr:`last_audit` the summary.
            audit_samples: budget of the audit's per-text fits.
            audit_seed: which texts are audited, and the fits' seed.

        Returns:
            One :class:`~slalom_core.SlalomExplanation` per text, ``method="amortized"``,
            with ``diagnostics["ood"]`` (and an :class:`AmortizedOODWarning` for texts unlike
            the training texts).
        """
        if self.head is None:
            raise RuntimeError("this explainer is not trained: call fit(run) or AmortizedExplainer.load(dir, ...)")
        if isinstance(texts, str):
            raise TypeError("explain_batch takes a list of texts; use explain() for one text")
        if not 0.0 <= audit <= 1.0:
            raise ValueError(f"audit must be a share of the texts in [0, 1], got {audit!r}")
        # A Segmentation is explained as given (a corpus run hands its cut texts this way).
        cut = [
            (t, 0) if isinstance(t, Segmentation) else self.adapter.segment_within_length(t, truncate=truncate)
            for t in texts
        ]
        segs = [seg for seg, _ in cut]
        if not segs:
            return []
        base, link = self._reference()
        t0 = time.perf_counter()
        enc = encode(self.adapter, [[i for u in s.unit_ids for i in u] for s in segs], batch_size=self.batch_size)
        model_seconds = time.perf_counter() - t0
        outputs = link.transform(enc.raw).numpy().reshape(len(segs), -1)[:, 0]
        n_tokens = sum(len(s.unit_ids) for s in segs) or 1
        exps = []
        for (seg, n_cut), hidden, out in zip(cut, enc.hidden, outputs):
            t1 = time.perf_counter()
            exp = self._assemble(seg, hidden, float(out), base)
            exp.diagnostics["truncated_positions"] = n_cut
            exp.diagnostics.model_seconds = model_seconds * len(seg.unit_ids) / n_tokens
            exp.diagnostics.fit_seconds = time.perf_counter() - t1
            exp.diagnostics.total_seconds = exp.diagnostics.model_seconds + exp.diagnostics.fit_seconds
            exps.append(exp)
        flagged = [i for i, e in enumerate(exps) if e.diagnostics["ood"]["warning"]]
        if flagged:
            first = exps[flagged[0]].diagnostics["ood"]["warning"]
            warn_user(
                f"{len(flagged)} of {len(exps)} texts are unlike the amortized explainer's training texts "
                f"(text {flagged[0]}: {first}); their scores are extrapolations: see diagnostics['ood'], or "
                "explain them per text",
                AmortizedOODWarning,
            )
        if audit > 0:
            self.last_audit = self._audit(texts, exps, audit, audit_samples, audit_seed)
        return exps

    def _reference(self) -> tuple[float, OutputLink]:
        """The empty input's output (the reference point) and the trained output reading, once."""
        if self._base is None:
            raw = encode(self.adapter, [[]]).raw
            link = OutputLink(raw.shape[1], self.config["trained_on"]["output"], None, self.adapter.class_names)
            if link.joint:
                raise ValueError("amortized explanations are for binary models (one log-odds column)")
            self._base = (float(link.transform(raw).reshape(-1)[0]), link)
        return self._base

    def _assemble(self, seg, hidden: torch.Tensor, output: float, base: float) -> SlalomExplanation:
        link = self._reference()[1]
        index: dict[tuple[int, ...], int] = {}
        units = np.array([index.setdefault(u, len(index)) for u in seg.unit_ids], dtype=np.int64)
        with torch.no_grad():
            v, s = pool_units(
                self.head(head_input(hidden).float()),
                torch.as_tensor(units),
                len(index),
                torch.zeros(len(index), dtype=torch.long),
                1,
            )
        ids = [i for u in seg.unit_ids for i in u]
        v, s = v.double().numpy(), s.double().numpy()
        mean = float(SlalomSurrogate(v, s).predict_sequences([units.tolist()])[0])
        law = law_meeting_output(self.config.get("law"), mean, len(units), output - base)
        trained = self.config["trained_on"]
        diag = Diagnostics(
            method=METHOD,
            n_positions=len(seg.unit_ids),
            n_units=len(index),
            # The text's forward pass and the empty input's (the reference point). The empty
            # input is run once per explainer and reused, but every explanation rests on it, as
            # every per-text fit's does: counting it per text keeps the two methods' counts
            # comparable and independent of how texts were batched.
            model_evaluations=2,
            tokens_evaluated=len(ids) + 2 * (len(self.adapter.prefix_ids) + len(self.adapter.suffix_ids)),
            reference="empty input",
            output=f"{trained['output']} (as trained)",
            output_kind=trained["output"],
            # The model's outputs and their names, as a per-text explanation records them
            # (a run's report reads the predicted class from them).
            n_outputs=link.n_outputs,
            class_names=None if link.class_names is None else [str(c) for c in link.class_names],
            importance_measured="predicted",
            # Read back by saved files and corpus runs (LengthLaw.from_diagnostics).
            length_exponent=law.exponent,
            length_curvature=law.curvature,
            length_pivot=float(law.pivot),
            length_law_from="the label fits' median; its pivot meets the model's output on the text",
            amortized_from={k: trained[k] for k in ("method", "n_samples", "run")},
            ood=ood_check(
                len(seg.unit_ids),
                ids,
                {"length_range": self.config["ood"]["length_range"], "vocabulary": self._vocabulary},
                max_unseen=self.max_unseen,
            ),
        )
        exp = SlalomExplanation(
            tokens=list(seg.tokens),
            token_ids=list(seg.tokenizer_ids),
            unit_index=units,
            surrogate=SlalomSurrogate(v, s, law=law),
            method=METHOD,
            granularity="token",
            model_output=output,
            base_value=base,
            diagnostics=diag,
        )
        diag.model_output, diag.surrogate_output, diag.full_text_gap = output, exp.surrogate_output, exp.full_text_gap
        return exp

    def _audit(self, texts, exps, share: float, n_samples: int, seed: int) -> AuditReport:
        """Fit a random share of the texts per text and compare (see :class:`AuditReport`)."""
        trained = self.config["trained_on"]
        k = max(1, math.ceil(share * len(texts)))
        picked = sorted(np.random.default_rng(seed).choice(len(texts), size=k, replace=False).tolist())
        t0 = time.perf_counter()
        fits = per_text_explain_batch(
            self.model,
            [texts[i] for i in picked],
            tokenizer=self.tokenizer,
            method=trained["method"],
            n_samples=n_samples,
            seed=seed,
            output=trained["output"],
            **trained.get("fit_options", {}),
        )
        report = AuditReport(picked, [], [], trained["method"], n_samples, time.perf_counter() - t0)
        for i, fit in zip(picked, fits):
            rho_v, rho_s = agreement(exps[i], fit)
            report.value_spearman.append(rho_v)
            report.importance_spearman.append(rho_s)
            exps[i].diagnostics["audit"] = {
                "value_spearman": rho_v,
                "importance_spearman": rho_s,
                "n_samples": n_samples,
            }
        return report

    @property
    def digest(self) -> str:
        """A fingerprint of the trained head: its weights, config and vocabulary (equal for
        a saved explainer and its reload; a corpus run records it to refuse another head)."""
        if self.head is None:
            raise RuntimeError("this explainer is not trained: it has no digest")
        h = hashlib.blake2b(digest_size=16)
        for name, tensor in sorted(self.head.state_dict().items()):
            h.update(name.encode())
            h.update(tensor.detach().cpu().float().contiguous().numpy().tobytes())
        # The config as saved (JSON), so that a reloaded explainer has the same digest.
        h.update(json.dumps(self.config, sort_keys=True, default=str).encode())
        h.update(json.dumps(sorted(self._vocabulary)).encode())
        return h.hexdigest()

    # -- saving --------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write ``head.safetensors`` and ``config.json`` (no pickle) to a folder; returns it.

        The config records the weights' sha256 (checked by :meth:`load`). Refused
        (FileExistsError) when the folder holds anything but a saved explainer (a model's or
        a run's folder, a user's files), and (ValueError) for a head with NaN weights.

        Example:
            >>> amortized.save("heads/imdb")  # doctest: +SKIP
        """
        if self.head is None:
            raise RuntimeError("nothing to save: this explainer is not trained")
        config = dict(self.config, vocabulary=sorted(self._vocabulary))
        self.path = write_head(path, self.head.state_dict(), config)
        return self.path

    @classmethod
    def load(cls, path: str | Path, model: torch.nn.Module, tokenizer: object | None = None) -> AmortizedExplainer:
        """A saved explainer for ``model``; refused (ValueError) when the head was trained for
        another model or tokenizer (by fingerprint), and (ValueError, naming the file) when
        its weights file is not the one saved (sha256), cut, foreign or not finite.

        Example:
            >>> amortized = AmortizedExplainer.load("heads/imdb", model, tok)  # doctest: +SKIP
        """
        folder = Path(path)
        config, state = read_head(folder, FORMAT)
        config.pop("weights_sha256", None)  # a property of the file, not of the head
        self = cls(model, tokenizer, hidden=config["head"]["hidden"], max_unseen=config["ood"]["max_unseen"])
        if config["model"]["digest"] != self.fingerprint["digest"]:
            raise ValueError(
                f"the explainer in {str(folder)!r} was trained for another model or tokenizer "
                f"({config['model'].get('name')!r}, fingerprint {config['model']['digest']}; this model's "
                f"{self.fingerprint['digest']}): load it with its own model, or train one for this model"
            )
        head = AmortizedHead(**config["head"])
        try:
            head.load_state_dict(state)
        except RuntimeError as err:
            raise ValueError(
                f"{str(folder / 'head.safetensors')!r} does not hold the head its config.json describes: "
                f"{' '.join(str(err).split())[:300]}"
            ) from None
        head.eval()
        self.head, self._vocabulary = head, set(config.pop("vocabulary"))
        self.config, self.path = config, folder
        return self


def _tokenizer_info(tok: object) -> dict:
    return {"class": type(tok).__name__, "name_or_path": str(getattr(tok, "name_or_path", ""))}
