"""The dataset card of an exported run (:func:`~.export.export_dataset`): ``README.md``.

YAML front matter the Hugging Face Hub reads (name, task, tags, the one ``default`` config
with its ``train`` split, the features), then what the run was (model, method, budget, texts,
the amortized pipeline's audit where there is one), what each column means with its unit and
reference point, how to load it and how to cite the method. Everything comes from the run's
manifest and the export's own counts: no model is loaded.

Every name the card takes from the run (class names from a model's ``id2label``, the model's
and the data file's names, methods, digests) is written as text: in a code span
(:func:`md_code`) or escaped (:func:`md_text`), on one line, so that no name can add HTML,
a link, an image or a heading to the page the Hub renders.
"""

from __future__ import annotations

import json
import re

from ..fit_quality import DETERMINED_RULE, HELDOUT_R2_LABEL, HELDOUT_R2_NOTE, RULE_SUMMARY
from ..scores import SCORES

__all__ = [
    "dataset_card",
    "yaml_features",
    "md_text",
    "md_code",
    "one_line",
    "CITATION",
    "audit_coverage",
    "COLUMN_MEANINGS",
]

#: How to cite SLALOM (arXiv:2405.13536).
CITATION = """@article{leemann2024attention,
  title   = {Attention Mechanisms Don't Learn Additive Models: Rethinking Feature Importance for Transformers},
  author  = {Leemann, Tobias and Fastowski, Alina and Pfeiffer, Felix and Kasneci, Gjergji},
  journal = {arXiv preprint arXiv:2405.13536},
  year    = {2024},
  url     = {https://arxiv.org/abs/2405.13536}
}"""

#: The meaning of each column the export writes (scores are described from the score table).
COLUMN_MEANINGS = {
    "id": "the text's id in the input data (a string, as written there)",
    "explained_class": "the class (output) this row explains, by name where the model names its classes: "
    "class 1 of a binary model unless the run chose another; every class of a joint multi-class fit, one row "
    "each",
    "predicted": "the class the model's output favours (null where the rows do not tell, e.g. one label of a "
    "multi-label model)",
    "status": "the text's fit as the run's report rates it, under the one fit-quality rule: `ok`, `fit flagged "
    f"(codes)` with the rule's flags: {RULE_SUMMARY}; or `flagged` (an amortized run's out-of-distribution or "
    "poor-audit flag); texts that failed are not rows (see `failures/` of the run)",
    "text": "the text as the input data hold it (a text cut to the model's length is kept whole)",
    "gold_label": "the input data's own label (null where the data have none)",
    "model_output": "f(x): the model's output on the whole text, in the explained units (below)",
    "base_value": "b, the reference point every score is measured from: the model's output on the empty input "
    "(the text with every token removed), in the explained units",
    "surrogate_output": "F(x): the fitted SLALOM's output on the text; F(x) = b + sum(contribution)",
    "method": "how the scores were obtained: a per-text fit's method, or `amortized` (a trained head, one "
    "forward pass per text)",
    "n_samples": "the per-text budget: model evaluations the fit could draw (null for amortized rows)",
    "full_text_gap": "f(x) - F(x) = model_output - surrogate_output: what the surrogate misses on the whole "
    "text (explained units; positive where the model's output is above the surrogate's)",
    "heldout_r2": f"the {HELDOUT_R2_LABEL} (null/NaN where the method keeps none): {HELDOUT_R2_NOTE}",
    "n_positions": "the number of positions (tokens) explained",
    "truncated_positions": "positions cut off a text longer than the model accepts (0 for most texts)",
    "tokens": "the text's positions as the tokenizer reads them (list of strings)",
    "token_ids": "each position's token ids (a list per position: one id per token; several for a word at "
    "`granularity=word`)",
    "value_se": "standard error of each position's value: the fit's Laplace approximation (Gauss-Newton "
    "curvature at the optimum); null for a method without standard errors (`ana`, `amortized`)",
    "importance_se": "standard error of each position's importance, as for value_se; near the prior's sd "
    "(0.25 by default) the samples did not determine it",
    "importance_determined": f"True where the data, not the prior, fix the position's importance ({DETERMINED_RULE}); "
    "all False without standard errors",
    "in_label_set": "the text was in the pipeline's label set (explained by a per-text fit to train the head)",
    "audited": "the text was audited: explained by a per-text fit too, never seen by the head",
    "audit_value_spearman": "audited texts: Spearman rank correlation of the head's values with the per-text "
    "fit's (NaN if not audited)",
    "audit_importance_spearman": "audited texts: the same for importances (NaN if not audited)",
    "ood": "the text is unlike the head's training texts (length outside their range, or too many unseen "
    "tokens): its scores are extrapolations",
    "ood_reason": "why the text is out of distribution (empty when it is not)",
    "poor_audit": "the audit's value Spearman fell below the pipeline's threshold",
    "flagged": f"ood, poor_audit, or a flag of the fit-quality rule ({RULE_SUMMARY}): a text the head's scores "
    "should not be trusted on; flag_reason says which",
    "flag_reason": "why the text is flagged (empty when it is not)",
}


def yaml_features(schema) -> list[str]:
    """The ``dataset_info.features`` lines of the card for an Arrow schema (the Hub's YAML).

    Example:
        >>> import pyarrow as pa
        >>> yaml_features(pa.schema([("id", pa.string()), ("tokens", pa.list_(pa.string()))]))
        ['  - name: id', '    dtype: string', '  - name: tokens', '    sequence: string']
    """
    import pyarrow as pa

    def dtype(t) -> str:
        return {pa.string(): "string", pa.bool_(): "bool"}.get(t, str(t))

    lines = []
    for field in schema:
        lines.append(f"  - name: {field.name}")
        t = field.type
        if pa.types.is_list(t) and pa.types.is_list(t.value_type):
            lines += ["    sequence:", f"      sequence: {dtype(t.value_type.value_type)}"]
        elif pa.types.is_list(t):
            lines.append(f"    sequence: {dtype(t.value_type)}")
        else:
            lines.append(f"    dtype: {dtype(t)}")
    return lines


def _size(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def _name(path: object) -> str:
    """A file's or folder's name only: a full path would show the folders of the machine."""
    text = str(path or "").rstrip("/\\")
    return re.split(r"[/\\]", text)[-1] or text


#: Characters that start Markdown's inline constructs (links, images, emphasis, code, tables).
_MD_PUNCTUATION = set("\\`*_[]()!|~#{}+-.")
#: Characters that start HTML, which the Hub and GitHub render inside Markdown.
_HTML = set("<>&\"'")


def one_line(value: object) -> str:
    """``value`` as one line of text: control characters (a newline that would start a
    heading) become spaces.

    Example:
        >>> one_line("a\\n# b")
        'a # b'
    """
    text = "".join(" " if ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029" else c for c in str(value))
    return " ".join(text.split())


def md_text(value: object) -> str:
    r"""``value`` as Markdown text that renders as itself: one line, HTML's characters as
    numeric references, Markdown's punctuation backslash-escaped (no link, image, emphasis
    or code can start in it).

    Example:
        >>> md_text("<b>[x](javascript:y)</b>")
        '&#60;b&#62;\\[x\\]\\(javascript:y\\)&#60;/b&#62;'
    """
    return "".join(f"&#{ord(c)};" if c in _HTML else "\\" + c if c in _MD_PUNCTUATION else c for c in one_line(value))


def md_code(value: object) -> str:
    """``value`` as a Markdown code span (rendered literally, HTML included): one line, in a
    fence of more backticks than any run of them in it.

    Example:
        >>> md_code("a`b")
        '``a`b``'
    """
    text = one_line(value)
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _num(x: object) -> str:
    return "n/a" if not isinstance(x, (int, float)) or x != x else f"{x:.3f}"


def _method_lines(manifest: dict) -> list[str]:
    opts = manifest.get("options") or {}
    head, auto = manifest.get("amortized"), manifest.get("auto")
    if not head:
        return [
            f"- **Method**: {md_code(opts.get('method'))}, a SLALOM fitted to each text on its own, with a budget "
            f"of {md_text(opts.get('n_samples'))} model evaluations per text (`n_samples`), seed "
            f"{md_text(opts.get('seed'))} (each "
            "text's seed derives from it and the text's id, so a text's scores do not depend on the run's order)."
        ]
    trained = head.get("trained_on") or {}
    lines = [
        "- **Method**: `amortized`: a small head on the model's hidden states gives each text's values and "
        "importances in one forward pass, no sampling (so no standard errors). The head (digest "
        f"{md_code(head.get('digest'))}) learned from per-text {md_code(trained.get('method'))} fits at "
        f"{md_text(trained.get('n_samples'))} model evaluations per text."
    ]
    if isinstance(auto, dict):
        labels = auto.get("labels") or {}
        lines.append(
            f"- **Label set**: {md_text(labels.get('n_texts'))} texts of this corpus explained per text with "
            f"{md_code(labels.get('method'))} at {md_text(labels.get('n_samples'))} model evaluations each "
            f"(chosen by {md_text(labels.get('chosen_by'))}); the head was trained on them."
        )
    return lines


def audit_coverage(audit: dict, n_texts: int | None = None) -> str:
    """What an amortized pipeline's audit covered, truthfully: texts audited of the texts in
    the run, and that share (the CLI's line, the report's box and the card say it so).

    Args:
        audit: ``manifest["auto"]["audit"]``.
        n_texts: the run's texts, for a manifest written before it recorded ``n_texts``.

    Example:
        >>> audit_coverage({"n_audited": 20, "n_texts": 40})
        '20 of the 40 texts in the run (50%)'
    """
    n, of = audit.get("n_audited"), audit.get("n_texts", n_texts)
    if not isinstance(n, int):  # numbers only: the card and the report write this line as it is
        return "an unrecorded number of texts"
    if not isinstance(of, int) or of <= 0:
        return f"{n} texts"
    return f"{n} of the {of} texts in the run ({100 * n / of:.2g}%)"


def _audit_lines(manifest: dict) -> list[str]:
    auto = manifest.get("auto")
    audit = auto.get("audit") if isinstance(auto, dict) else None
    if not isinstance(audit, dict):
        return []
    v, s = audit.get("value_spearman") or {}, audit.get("importance_spearman") or {}
    flags = auto.get("flags") or {}
    return [
        "",
        "## Audit",
        "",
        f"{audit_coverage(audit, (manifest.get('input') or {}).get('n_rows'))}, never shown to the head, were "
        "also explained per text, and the head's scores compared with those fits by Spearman rank correlation over "
        "each text's tokens:",
        "",
        "| | mean | median | 10th percentile |",
        "| --- | --- | --- | --- |",
        f"| value | {_num(v.get('mean'))} | {_num(v.get('median'))} | {_num(v.get('p10'))} |",
        f"| importance | {_num(s.get('mean'))} | {_num(s.get('median'))} | {_num(s.get('p10'))} |",
        "",
        f"{md_text(audit.get('n_poor'))} audited texts fell below a value Spearman of "
        f"{_num(audit.get('poor_below'))}. Flagged in all: {md_text(flags.get('n_flagged'))} texts "
        f"({md_text(flags.get('n_ood'))} out of distribution, {md_text(flags.get('n_poor_audit'))} with a poor "
        f"audit, {md_text(flags.get('n_fit_flags', 0))} flagged by the fit-quality rule: "
        f"{RULE_SUMMARY}); see the columns `flagged` and "
        "`flag_reason`.",
    ]


def _column_rows(schema) -> list[str]:
    rows = ["| column | meaning |", "| --- | --- |"]
    for field in schema:
        if field.name in SCORES:
            score = SCORES[field.name]
            meaning = f"per position: `{score.formula}`, in {score.unit}"
            if field.name == "value":
                meaning += "; the token's effect alone: the surrogate's output on the token, minus b"
            elif field.name == "importance":
                meaning += "; how much weight the token takes from the others, α = softmax(s) over the positions"
            elif field.name == "contribution":
                meaning += "; b + sum(contribution) = surrogate_output"
            elif field.name == "removal":
                meaning += "; the surrogate's predicted change when the position is removed"
        else:
            meaning = COLUMN_MEANINGS.get(field.name, "")
        rows.append(f"| `{field.name}` | {meaning} |")
    return rows


def dataset_card(
    run,
    schema,
    *,
    n_rows: int,
    n_texts: int,
    n_failed: int,
    n_shards: int,
    class_names: list[str] | None = None,
    output: str | None = None,
) -> str:
    """The dataset card (``README.md``) of an exported run.

    Args:
        run: the :class:`~slalom_core.corpus.CorpusRun` exported.
        schema: the dataset's Arrow schema (:func:`~.export.dataset_schema`).
        n_rows: rows written; n_texts: texts explained; n_failed: texts that failed;
        n_shards: Parquet shards written.
        class_names: the model's class names, where the run knows them. Default: None.
        output: how the run read the model's outputs (a text's ``output``, e.g. "logits
            (detected)"). Default: None (the run's option).

    Returns:
        The card's text: YAML front matter, then Markdown.

    Example:
        >>> card = dataset_card(run, dataset_schema(), n_rows=10, n_texts=10, n_failed=0, n_shards=1)  # doctest: +SKIP
    """
    m = run.manifest
    model, source = m.get("model") or {}, m.get("input") or {}
    model = model if isinstance(model, dict) else {"name": model}
    data = _name(source.get("data")) or "a corpus"
    title = f"SLALOM explanations of {one_line(data)} ({one_line(_name(model.get('name')))})"
    body = [
        f"# SLALOM explanations of {md_text(data)} ({md_text(_name(model.get('name')))})",
        "",
        "Precomputed explanations of every text of a corpus by SLALOM (Softmax-Linked Additive Log-Odds "
        "Model), written by `slalom-xai export`. SLALOM describes each token by two numbers, a **value** (its "
        "effect alone) and an **importance** (how much weight it takes from the other tokens), because a "
        "transformer's attention cannot be described by one additive score per token; the additive "
        "`contribution` and the other scores follow from the two. One row per (text, explained class), with "
        "the tokens and every score as lists of the same length.",
        "",
        *_run_section(m, model, data, n_rows, n_texts, n_failed, n_shards, class_names, output),
        *_fixed_sections(schema),
    ]
    return "\n".join(_front_matter(title, n_rows, schema) + body)


def _front_matter(title: str, n_rows: int, schema) -> list[str]:
    """The card's YAML front matter (what the Hub reads: name, task, size, files, features).
    Written line by line: a YAML library is no dependency of the core, and every value here
    is either fixed or JSON-quoted (JSON is YAML)."""
    return [
        "---",
        f"pretty_name: {json.dumps(title)}",
        "task_categories:",
        "- text-classification",
        "tags:",
        *[f"- {t}" for t in ("explainability", "interpretability", "feature-attribution", "slalom", "xai")],
        "size_categories:",
        f"- {_size(n_rows)}",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        "    path: data/train-*.parquet",
        "dataset_info:",
        "  features:",
        *yaml_features(schema),
        "---",
    ]


def _run_section(
    m: dict, model: dict, data: str, n_rows, n_texts, n_failed, n_shards, class_names, output
) -> list[str]:
    """The card's "The run" section: model, tokenizer, method, units, texts, version, audit."""
    opts, source = m.get("options") or {}, m.get("input") or {}
    classes = ", ".join(md_code(c) for c in class_names) if class_names else "as the model's config names them"
    units = "log-odds of the explained class (centred logits for a joint fit over more than two classes)"
    read = output or opts.get("output", "auto")
    return [
        "## The run",
        "",
        f"- **Model**: {md_code(_name(model.get('name')))} ({md_code(model.get('class', '?'))}), fingerprint "
        f"digest {md_code(model.get('digest', '?'))} (a hash of its weights, config and tokenizer); classes: "
        f"{classes}.",
        "- **Tokenizer**: the model's own, as handed to the run (its vocabulary and settings are part of the "
        "digest); `tokens` and `token_ids` are its pieces.",
        *_method_lines(m),
        f"- **Reference point and units**: scores are {units}, measured from `base_value` (reference "
        f"{md_code(opts.get('reference', 'empty'))}: the model's output on the empty input); the model's outputs "
        f"were read as {md_code(read)}.",
        f"- **Texts**: {n_texts} explained ({n_rows} rows), {n_failed} failed (empty, unreadable or "
        f"refused texts; not in the dataset), of {md_text(source.get('n_rows', '?'))} rows of {md_code(data)}; "
        f"{n_shards} Parquet shard(s).",
        f"- **Written by** slalom-xai {md_text(m.get('version', '?'))}.",
        *_audit_lines(m),
        "",
    ]


def _fixed_sections(schema) -> list[str]:
    """The card's columns, how to load it and the citation."""
    return [
        "## Columns",
        "",
        "Lists hold one entry per position, in the text's order. A token that occurs several times shares its "
        "value and importance (they are properties of the token in this text); `contribution` and `removal` "
        "are per position.",
        "",
        *_column_rows(schema),
        "",
        "## Load",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        'ds = load_dataset("parquet", data_dir="PATH/TO/THIS/FOLDER")["train"]  # or the Hub id once pushed',
        "row = ds[0]",
        'list(zip(row["tokens"], row["contribution"]))  # b + sum = surrogate_output',
        "```",
        "",
        "## Citation",
        "",
        "The method: T. Leemann, A. Fastowski, F. Pfeiffer and G. Kasneci, *Attention Mechanisms Don't Learn "
        "Additive Models: Rethinking Feature Importance for Transformers*, arXiv:2405.13536.",
        "",
        "```bibtex",
        CITATION,
        "```",
        "",
    ]
