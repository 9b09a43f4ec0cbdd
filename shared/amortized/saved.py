"""An amortized explainer's folder: ``config.json`` and ``head.safetensors`` (no pickle).

Written beside and renamed, into a folder that holds nothing else (a model's folder, a run's
or a user's own files are refused, never written over). The config records the sha256 of
the weights file, so that a swapped, changed or cut weights file is refused when read; every
error names the file it is about.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import torch

from ..files import replace_with, write_json

__all__ = ["CONFIG", "WEIGHTS", "FORMAT_PREFIX", "weights_digest", "check_finite", "write_head", "read_head"]

CONFIG, WEIGHTS = "config.json", "head.safetensors"
#: Every version of the saved format starts so (``slalom-amortized/1``, ...).
FORMAT_PREFIX = "slalom-amortized/"
#: What a config must hold to be read: (key, subkey or None).
_REQUIRED = (("format", None), ("head", "n_layers"), ("head", "width"), ("head", "hidden"), ("model", "digest"))
_REQUIRED += (("ood", "max_unseen"), ("ood", "length_range"), ("trained_on", "output"), ("vocabulary", None))


def weights_digest(path: str | Path) -> str:
    """The sha256 (hex) of a file's bytes.

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "w"
        >>> _ = p.write_bytes(b"")
        >>> weights_digest(p)[:12]
        'e3b0c44298fc'
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_finite(state: dict[str, torch.Tensor], where: str) -> None:
    """Raise a ValueError naming ``where`` and the tensors if any weight is NaN or infinite.

    Example:
        >>> check_finite({"w": torch.tensor([1.0, float("nan")])}, "head.safetensors")
        Traceback (most recent call last):
        ...
        ValueError: head.safetensors: weights not finite (NaN or inf) in w: a diverged or damaged head gives NaN scores; train it again
    """
    bad = sorted(name for name, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all()))
    if bad:
        raise ValueError(
            f"{where}: weights not finite (NaN or inf) in {', '.join(bad)}: a diverged or damaged head gives NaN "
            "scores; train it again"
        )


def _check_folder(folder: Path) -> None:
    """Refuse a folder that holds anything but a saved head (never write over what we did not write)."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise FileExistsError(f"{str(folder)!r} is a file, not a folder: save the explainer to a new folder")
    others = sorted(p.name for p in folder.iterdir() if p.name not in (CONFIG, WEIGHTS))
    if others:
        raise FileExistsError(
            f"{str(folder)!r} holds files an amortized explainer did not write ({', '.join(others[:5])}): save it to "
            "a new folder (never into a model's or a run's folder)"
        )
    config = folder / CONFIG
    if config.exists():
        try:
            fmt = json.loads(config.read_text(encoding="utf-8")).get("format", "")
        except (ValueError, AttributeError, UnicodeError):
            fmt = None
        if not isinstance(fmt, str) or not fmt.startswith(FORMAT_PREFIX):
            raise FileExistsError(
                f"{str(config)!r} is not an amortized explainer's config: it is not overwritten; save to a new folder"
            )


def write_head(folder: str | Path, state: dict[str, torch.Tensor], config: dict) -> Path:
    """Write the weights and the config (with the weights' sha256) to ``folder``; returns it.

    Each file is written beside its place and renamed into it, so that an interrupted save
    never leaves a half-written file under the final name.

    Example:
        >>> write_head("heads/imdb", head.state_dict(), config)  # doctest: +SKIP
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    check_finite(state, str(folder / WEIGHTS))
    _check_folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # The weights first, then the config holding their digest: an interrupted save leaves a
    # config whose digest the weights fail, which loading refuses.
    tensors = {k: t.detach().contiguous() for k, t in state.items()}
    replace_with(folder / WEIGHTS, lambda tmp: save_file(tensors, str(tmp)))
    write_json(folder / CONFIG, dict(config, weights_sha256=weights_digest(folder / WEIGHTS)))
    return folder


def _read_config(folder: Path, format_name: str) -> dict:
    path = folder / CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeError) as err:
        raise ValueError(f"{str(path)!r} is not an amortized explainer's config (not JSON: {err})") from None
    if not isinstance(config, dict) or config.get("format") != format_name:
        said = config.get("format") if isinstance(config, dict) else type(config).__name__
        raise ValueError(f"{str(path)!r} is not a {format_name} explainer's config (format {said!r})")
    for key, sub in _REQUIRED:
        part = config.get(key)
        if part is None or (sub is not None and (not isinstance(part, dict) or sub not in part)):
            raise ValueError(f"{str(path)!r} lacks {key + ('.' + sub if sub else '')}: not a complete saved explainer")
    return config


def read_head(folder: str | Path, format_name: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """A saved head's config and weights, checked: the config's format and keys, the weights'
    sha256 against the config's record, the file's readability, finite weights.

    Raises:
        FileNotFoundError: the folder holds no saved head.
        ValueError: a damaged, swapped or foreign file (the message names it).

    Example:
        >>> config, state = read_head("heads/imdb", "slalom-amortized/1")  # doctest: +SKIP
    """
    from safetensors.torch import load_file

    folder = Path(folder)
    weights = folder / WEIGHTS
    if not (folder / CONFIG).is_file() or not weights.is_file():
        raise FileNotFoundError(f"{str(folder)!r} holds no saved amortized explainer ({CONFIG}, {WEIGHTS})")
    config = _read_config(folder, format_name)
    recorded = config.get("weights_sha256")
    if recorded is None:
        warnings.warn(
            f"{str(folder / CONFIG)!r} records no digest of {WEIGHTS} (saved before digests): its weights cannot be "
            "checked; save the explainer again to add one",
            UserWarning,
            stacklevel=3,
        )
    else:
        actual = weights_digest(weights)
        if actual != recorded:
            raise ValueError(
                f"{str(weights)!r}: its sha256 digest {actual[:16]}… is not the one its {CONFIG} records "
                f"({str(recorded)[:16]}…): the weights file was swapped or changed since it was saved; restore it, "
                "or train the explainer again"
            )
    try:
        state = load_file(str(weights))
    except Exception as err:  # noqa: BLE001 - safetensors raises its own error types; the file is named
        raise ValueError(f"{str(weights)!r} is not a readable safetensors file: {err}") from None
    check_finite(state, repr(str(weights)))
    return config, state
