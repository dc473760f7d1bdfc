"""Every command shown in README.md and docs/getting-started.md is exercised, so the docs cannot rot.

The commands are read out of the Markdown (fenced ``bash`` blocks), not copied here. Each runs in a
scratch working directory laid out like a checkout (``equiv/``, ``configs/``, the entry scripts and
``pyproject.toml`` linked in, ``../shared`` linked to the shared data), so the documented relative
paths resolve exactly as they do for a user, and nothing is written into the repository:

- ``trainer_cli.py`` and ``search_cli.py eval``: parsed with ``--print_config`` and their configs
  (the default suite); run for real by the ``slow`` tour test.
- ``search_cli.py pairs``, ``compare`` and ``report``: run for real, on a tiny random-init judge
  exported where the docs say the trained one lies, and on real run directories written by
  ``search_cli.py eval`` with scripted engines (``tests/helpers/runs.py``).
- ``python -m equiv.judge.ensemble``: run for real on tiny judges placed at its ``--members``
  paths, calibrated on the documented config's split (needs ``../shared/data``).
- ``pip install -e ".[extra]"``: the extra exists in pyproject.toml; ``mkdocs``: mkdocs.yml exists
  (CI builds the site strictly); ``pytest``: this suite itself.

The slow tour test (``tests/test_docs_tour.py``) runs the tour for real and compares its figures
with the page's; the GSM8K judge's own fits (minutes each) are checked by parsing, as above.

A command of any other shape fails the test: a new kind of documented command needs a check here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from equiv.data.problems import DEMO_PREFIX, resolve_data_path
from tests.helpers.paths import REPO_ROOT, SHARED_DATA

DOCUMENTS = ("README.md", "docs/getting-started.md")
LINKED = ("equiv", "configs", "benchmarks", "trainer_cli.py", "search_cli.py", "pyproject.toml", "mkdocs.yml")
PYTHONS = ("python", "python3", ".venv/bin/python")


@dataclass(frozen=True)
class Command:
    """One shell command from a document: where it is, and its words."""

    source: str  # "README.md:17"
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.source}: {shlex.join(self.argv)}"


def bash_blocks(text: str) -> list[tuple[int, str]]:
    """(line number of the first line, body) of each fenced ``bash`` block, indented ones included."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"^(\s*)```bash\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, start, body = m.group(1), i + 2, []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        blocks.append((start, "\n".join(body)))
        i += 1
    return blocks


def commands_in(doc: str) -> list[Command]:
    """The commands of a document's ``bash`` blocks: continuations joined, comments dropped, ``&&`` split."""
    out = []
    for start, body in bash_blocks((REPO_ROOT / doc).read_text()):
        pending: list[str] = []
        for offset, line in enumerate(body.splitlines()):
            pending.append(line.rstrip().removesuffix("\\"))
            if line.rstrip().endswith("\\"):
                continue
            source = f"{doc}:{start + offset - len(pending) + 1}"
            for part in _split_and(shlex.split(" ".join(pending), comments=True)):
                if part:
                    out.append(Command(source, tuple(part)))
            pending = []
    return out


def _split_and(words: list[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for w in words:
        if w == "&&":
            parts.append([])
        else:
            parts[-1].append(w)
    return parts


def unique(commands: list[Command]) -> list[Command]:
    """Each distinct command once (README and getting-started share the tour), first place kept."""
    seen: dict[tuple[str, ...], Command] = {}
    for c in commands:
        seen.setdefault(c.argv, c)
    return list(seen.values())


ALL_COMMANDS = [c for doc in DOCUMENTS for c in commands_in(doc)]


def kind(cmd: Command) -> str:
    """What sort of command this is: decides how it is checked."""
    a = cmd.argv
    if a[:3] == ("python3", "-m", "venv"):
        return "venv"
    if a[0].endswith("pip") and a[1:3] == ("install", "-e"):
        return "pip_extra"
    if a[0].endswith("mkdocs"):
        return "mkdocs"
    if a[0] in PYTHONS and a[1:3] == ("-m", "pytest"):
        return "pytest"
    if a[0] in PYTHONS and a[1:3] == ("trainer_cli.py", "recipe"):
        return "recipe"
    if a[0] in PYTHONS and a[1] == "trainer_cli.py":
        return "trainer"
    if a[0] in PYTHONS and a[1] == "search_cli.py" and len(a) > 2:
        return f"search_{a[2]}"
    if a[0] in PYTHONS and a[1:3] == ("-m", "equiv.judge.ensemble"):
        return "ensemble"
    if a[0] in PYTHONS and a[1:3] == ("-m", "equiv.prune.crossval"):
        return "crossval"
    return "unknown"


# README's tour ends where the real result (a 1.1 GB policy, minutes a problem) begins.
TOUR_END = "## A real result on your CPU"


def tour_commands() -> list[Command]:
    """README's commands before :data:`TOUR_END`: the set-up and the five-command tour."""
    text = (REPO_ROOT / "README.md").read_text()
    end = text.splitlines().index(TOUR_END) + 1 if TOUR_END in text.splitlines() else 10**9
    return [c for c in commands_in("README.md") if int(c.source.split(":")[1]) < end]


# -- the scratch checkout ---------------------------------------------------------------------------
def make_workdir(root: Path) -> Path:
    """``root/work`` laid out like a checkout, with ``root/shared`` -> the shared data's parent."""
    work = root / "work"
    work.mkdir(parents=True)
    for name in LINKED:
        (work / name).symlink_to(REPO_ROOT / name)
    if SHARED_DATA.exists():
        (root / "shared").mkdir()
        (root / "shared" / "data").symlink_to(SHARED_DATA)
    return work


def run(cmd: Command, work: Path, *extra: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """The command in a fresh interpreter from ``work``, offline (the slow tour runs this way)."""
    argv = [sys.executable if cmd.argv[0] in PYTHONS else cmd.argv[0], *cmd.argv[1:], *extra]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               WANDB_MODE="offline", EQUIV_SHARED_DATA=str(SHARED_DATA))
    return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)


def run_here(cmd: Command, work: Path, monkeypatch, capsys, *extra: str) -> tuple[int, str, str]:
    """The command's entry point called in this process from ``work`` (the real CLI, without paying
    a fresh interpreter's imports per command): (exit status, stdout, stderr)."""
    monkeypatch.chdir(work)
    argv = [*cmd.argv[2:], *extra]
    capsys.readouterr()
    try:
        if cmd.argv[1:3] == ("-m", "equiv.judge.ensemble"):
            from equiv.judge.ensemble import main

            argv = [*cmd.argv[3:], *extra]
        elif cmd.argv[1] == "trainer_cli.py":
            from equiv.judge.cli import main
        else:
            from search_cli import main
        status = main(argv)
    except SystemExit as exc:  # argparse and jsonargparse's --print_config exit
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out = capsys.readouterr()
    return int(status or 0), out.out, out.err


def members_of(argv: tuple[str, ...]) -> list[str]:
    """The ``--members`` paths of an ensemble command."""
    i = argv.index("--members") + 1
    out = []
    while i < len(argv) and not argv[i].startswith("-"):
        out.append(argv[i])
        i += 1
    return out


def option(argv: tuple[str, ...], name: str) -> str | None:
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A scratch checkout holding what the documented commands expect to find: an exported judge
    at every ``--model`` path of a ``pairs`` command and a run directory at every path that
    ``compare``/``report`` read."""
    from tests.helpers.judges import make_tiny_judge
    from tests.helpers.runs import runner_runs

    work = make_workdir(tmp_path_factory.mktemp("docs"))
    for cmd in ALL_COMMANDS:
        model = option(cmd.argv, "--pruner.model") or option(cmd.argv, "--model")
        if kind(cmd) == "search_pairs" and model and not (work / model).exists():
            make_tiny_judge(work / model)
        if kind(cmd) == "ensemble":
            for seed, member in enumerate(members_of(cmd.argv)):
                if not (work / member).exists():
                    make_tiny_judge(work / member, seed=seed)
    run_dirs = sorted({w for c in ALL_COMMANDS if kind(c) in ("search_compare", "search_report")
                       for w in c.argv[3:] if not w.startswith("-") and w != option(c.argv, "--out")})
    scripted = runner_runs(tmp_path_factory.mktemp("scripted"), ("mcts",), n=2)  # [base, pruned]; compare and report need no more
    for rel in run_dirs:
        shutil.copytree(scripted[1 if "prun" in rel else 0], work / rel)
    return work


# -- tests ------------------------------------------------------------------------------------------
def test_the_documents_show_commands():
    assert {c.source.split(":")[0] for c in ALL_COMMANDS} == set(DOCUMENTS)
    assert len(ALL_COMMANDS) >= 10


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_setup_commands_come_first_and_keep_their_contract(doc):
    """The first bash block is the two set-up commands: install + the demo fit, then the tests."""
    first = bash_blocks((REPO_ROOT / doc).read_text())[0][1].splitlines()
    assert first == [
        'python3 -m venv .venv && .venv/bin/pip install -e ".[dev]" && .venv/bin/python trainer_cli.py fit --config configs/demo.yaml',
        ".venv/bin/python -m pytest",
    ]


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_the_tour_is_complete(doc):
    """Train a judge, score pairs, a pruned and an unpruned search with the trained demo judge,
    compare them and write the report."""
    kinds = [kind(c) for c in commands_in(doc)]
    for needed in ("trainer", "search_pairs", "search_eval", "search_compare", "search_report"):
        assert needed in kinds, f"{doc} shows no {needed} command"
    evals = [c.argv for c in commands_in(doc) if kind(c) == "search_eval"]
    assert any(option(a, "--pruner.strategy") == "none" for a in evals), "no unpruned search"
    assert any(option(a, "--pruner.strategy") is None for a in evals), "no search pruned by the recipe's judge"


def test_the_demo_search_prunes_with_the_judge_the_first_command_exports():
    """``configs/search/demo_cpu.yaml`` points its model pruner at where ``configs/demo.yaml`` exports."""
    demo = yaml.safe_load((REPO_ROOT / "configs" / "demo.yaml").read_text())
    search = yaml.safe_load((REPO_ROOT / "configs" / "search" / "demo_cpu.yaml").read_text())
    assert search["pruner"]["strategy"] == "model"
    assert Path(search["pruner"]["model"]) == Path(demo["trainer"]["default_root_dir"]) / "judge"


@pytest.mark.parametrize("cmd", unique(ALL_COMMANDS), ids=str)
def test_documented_command(cmd: Command, workdir: Path, monkeypatch, capsys):
    k = kind(cmd)
    if k == "venv":
        assert cmd.argv == ("python3", "-m", "venv", ".venv")
    elif k == "pip_extra":
        extras = re.fullmatch(r"\.\[([\w,-]+)\]", cmd.argv[3])
        assert extras, f"{cmd}: expected an editable install with extras"
        try:
            import tomllib  # Python 3.11+
        except ModuleNotFoundError:  # Python 3.10
            tomllib = pytest.importorskip("tomli")
        declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        for extra in extras.group(1).split(","):
            assert extra in declared, f"{cmd}: no extra {extra!r} in pyproject.toml"
    elif k == "mkdocs":
        assert cmd.argv[1] in ("serve", "build") and (REPO_ROOT / "mkdocs.yml").exists()
    elif k == "pytest":
        assert cmd.argv[3:] == (), f"{cmd}: the test command takes no options"
    elif k in ("trainer", "search_eval"):
        status, out, err = run_here(cmd, workdir, monkeypatch, capsys, "--print_config")
        assert status == 0, f"{cmd}\n{err[-3000:]}"
        config = yaml.safe_load(out)
        data = [config["data"]["train"], config["data"]["val"]] if k == "trainer" else [config["data"]["path"]]
        for path in filter(None, data):  # a calibration split instead of data.val: None
            if path.startswith("../shared/") and not SHARED_DATA.exists():
                continue
            if path.startswith(DEMO_PREFIX):  # shipped inside the package
                assert resolve_data_path(path).exists(), f"{cmd}: its data {path} is not in the package"
                continue
            assert (workdir / path).exists(), f"{cmd}: its data file {path} does not exist"
    elif k == "recipe":
        # two fits of about 10 minutes and their ensemble: the command is parsed, each fit it runs
        # parses with --print_config and finds its data, and its ensemble averages those fits'
        # exports (tests/test_judge_recipe.py runs it for real, shrunk)
        from equiv.judge.recipe import build_parser, plan

        args = build_parser().parse_args(list(cmd.argv[3:]))
        steps = plan(Path(args.root), shlex.split(args.fit_options))
        fits = [step for step in steps if step.kind == "fit"]
        for step in fits:
            status, out, err = run_here(Command(cmd.source, (cmd.argv[0], "trainer_cli.py", *step.argv)), workdir,
                                        monkeypatch, capsys, "--print_config")
            assert status == 0, f"{cmd}: {step.name}\n{err[-3000:]}"
            config = yaml.safe_load(out)
            assert Path(config["trainer"]["default_root_dir"]) / "judge" == step.output
            for path in [config["data"]["train"], *config["data"]["train_more"]]:
                if SHARED_DATA.exists() or not path.startswith("../shared/"):
                    assert (workdir / path).exists(), f"{cmd}: its data file {path} does not exist"
        (ensemble,) = [step for step in steps if step.kind == "ensemble"]
        assert members_of(tuple(ensemble.argv)) == [str(step.output) for step in fits]
        assert ensemble.output == Path("outputs/gsm8k_equiv/ensemble")  # where the docs name the shipped judge
    elif k == "ensemble":
        if not SHARED_DATA.exists():
            pytest.skip("the calibration split comes from ../shared/data/gsm8k_equiv")
        out_dir = workdir / "ensembles" / Path(option(cmd.argv, "--out")).name  # the documented --out may hold a judge already
        argv = list(cmd.argv)
        argv[argv.index("--out") + 1] = str(out_dir)
        # in this process (tests/test_judge_ensemble.py runs the command in a real one)
        status, _, err = run_here(Command(cmd.source, tuple(argv)), workdir, monkeypatch, capsys)
        assert status == 0, f"{cmd}\n{err[-3000:]}"
        settings = json.loads((out_dir / "config.json").read_text())["equiv"]
        assert len(settings["members"]) == len(members_of(cmd.argv)) - 1 and "threshold" in settings["policy"]
        assert "hybrid" not in settings, cmd  # the combiner was removed in 2026-11
    elif k == "crossval":
        # k fits of the recipe (minutes each): the command is parsed, its recipe's fit arguments are
        # checked by the trainer, and its pooled data read; tests/test_prune_crossval.py runs it for real.
        from equiv.prune.crossval import build_parser, check_score_apart, recipe_records

        args = build_parser().parse_args(list(cmd.argv[3:]))
        if not SHARED_DATA.exists():
            pytest.skip("the recipe's pairs are in ../shared/data/gsm8k_equiv")
        check_score_apart((REPO_ROOT / args.recipe).resolve(), [REPO_ROOT / d for d in args.data],
                          [REPO_ROOT / f for f in args.score_apart])
        records, _ = recipe_records((REPO_ROOT / args.recipe).resolve())
        assert len(records) > args.folds
        status, _, err = run_here(Command(cmd.source, (cmd.argv[0], "trainer_cli.py", "fit", "--config", str(args.recipe),
                                                       *[a for a in args.fit_args if a != "--"])),
                                  workdir, monkeypatch, capsys, "--print_config")
        assert status == 0, f"{cmd}: its fit arguments do not parse\n{err[-3000:]}"
    elif k in ("search_pairs", "search_compare", "search_report"):
        if any(w.startswith("../shared/") for w in cmd.argv) and not SHARED_DATA.exists():
            pytest.skip("its data is in ../shared/data")
        status, out, err = run_here(cmd, workdir, monkeypatch, capsys)
        assert status == 0, f"{cmd}\n{err[-3000:]}"
        if k == "search_pairs":
            # the summary's f1 line, or with --json the metrics object
            assert any(line.startswith("f1 ") or '"f1"' in line for line in out.strip().splitlines()), out
        elif k == "search_compare":
            for rel in cmd.argv[3:]:
                assert Path(rel).name in out
        else:
            assert (workdir / option(cmd.argv, "--out") / "index.html").exists()
    else:
        pytest.fail(f"{cmd}: no check for this kind of command; add one to tests/test_docs_commands.py")


# -- links from outside the site ----------------------------------------------------------------------
LINKING = ("README.md", "benchmarks/README.md")


def heading_anchors(markdown: str) -> set[str]:
    """The anchors Python-Markdown's ``toc`` extension gives a page's headings (its default slugify)."""
    import unicodedata

    anchors, fenced = set(), False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)).replace("`", "")
            text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
            text = re.sub(r"[^\w\s-]", "", text).strip().lower()
            anchors.add(re.sub(r"[-\s]+", "-", text))
    return anchors


@pytest.mark.parametrize("doc", LINKING)
def test_links_into_the_docs_resolve(doc):
    """README and benchmarks/README link into docs/ by file and anchor; mkdocs checks the links
    inside the site, this checks the ones from outside it (a moved heading breaks them)."""
    source = REPO_ROOT / doc
    links = re.findall(r"\]\(([^)\s]+)\)", source.read_text())
    local = [link for link in links if not re.match(r"^[a-z]+:", link)]
    assert local, f"{doc} links nowhere"
    for link in local:
        path, _, anchor = link.partition("#")
        target = (source.parent / path).resolve()
        assert target.exists(), f"{doc}: link {link!r}: {target} does not exist"
        if anchor and target.suffix == ".md":
            assert anchor in heading_anchors(target.read_text()), f"{doc}: link {link!r}: no heading with that anchor"


def test_the_front_pages_are_short_and_in_users_words():
    """README is what a user reads first: at most 150 lines (120 until issue 68 asked for "A real
    result on your CPU"), no development jargon; the sealed data's README says who read its pairs
    (a language model given the rubric), not tooling labels."""
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "yardstick" not in readme.lower() and "helper" not in readme.lower()
    sealed = (REPO_ROOT / "benchmarks" / "data" / "sealed" / "README.md").read_text()
    assert "helper session" not in sealed and "helper-SW" not in sealed and "language model given" in sealed


# -- Python examples in the user guide ----------------------------------------------------------------
def python_blocks(doc: str) -> list[tuple[int, str]]:
    blocks, lines = [], (REPO_ROOT / doc).read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "```python":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((i + 2, "\n".join(lines[i + 1:end])))
    return blocks


PYTHON_EXAMPLES = [(doc, line, code) for doc in ["README.md", *sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "docs").glob("*.md"))]
                   for line, code in python_blocks(doc)]


@pytest.mark.parametrize(("doc", "line", "code"), PYTHON_EXAMPLES, ids=[f"{d}:{n}" for d, n, _ in PYTHON_EXAMPLES])
def test_python_example_runs(doc: str, line: int, code: str, tmp_path: Path, monkeypatch) -> None:
    """Each ``python`` block of the docs runs as written, from a scratch checkout where every
    judge directory it names holds a tiny random-init exported judge."""
    from tests.helpers.judges import make_tiny_judge

    work = make_workdir(tmp_path)
    for path in re.findall(r'model="([^"]+)"', code):
        if not (work / path).exists():
            make_tiny_judge(work / path)
    monkeypatch.chdir(work)
    exec(compile(code, f"{doc}:{line}", "exec"), {"__name__": "docs_example"})


def test_the_readme_snippet_prints_what_it_shows(tmp_path: Path, monkeypatch) -> None:
    """README's Python example shows its output (``# prints: ...``), and that is what it prints."""
    import contextlib
    import io

    (line, code), = python_blocks("README.md")
    shown = re.findall(r"# prints: (.*)$", code, re.M)
    assert shown, "README's Python example shows no output"
    monkeypatch.chdir(make_workdir(tmp_path))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "docs_example"})
    assert printed.getvalue().splitlines() == shown


# -- the paper's rows ----------------------------------------------------------------------------------
PAPER_COMMANDS = [
    Command(f"docs/reproducing.md:{n}", tuple(shlex.split(span)))
    for n, line in enumerate((REPO_ROOT / "docs" / "reproducing.md").read_text().splitlines(), 1)
    for span in re.findall(r"`(python (?:trainer_cli\.py fit|search_cli\.py eval) [^`]+)`", line)
]


def test_every_paper_row_has_a_command():
    kinds = [kind(c) for c in PAPER_COMMANDS]
    assert kinds.count("search_eval") >= 14 and kinds.count("trainer") >= 2


@pytest.mark.parametrize("cmd", PAPER_COMMANDS, ids=str)
def test_paper_command_parses(cmd: Command, tmp_path: Path, monkeypatch, capsys):
    """The GPU commands cannot run here; each must parse with its recipes (``--print_config``)."""
    status, out, err = run_here(cmd, make_workdir(tmp_path), monkeypatch, capsys, "--print_config")
    assert status == 0, f"{cmd}\n{err[-3000:]}"
    assert yaml.safe_load(out)["data"]


def test_the_tour_trains_nothing_twice_and_stops_before_the_gsm8k_judge():
    """README's tour (run for real by tests/test_docs_tour.py) is the set-up fit and the tour steps:
    one fit, the demo's, and not the GSM8K judge's long fits, which training.md documents."""
    tour = tour_commands()
    kinds = [kind(c) for c in tour]
    assert kinds.count("trainer") == 1 and "ensemble" not in kinds
    assert not any("gsm8k_equiv" in " ".join(c.argv) for c in tour)
    for needed in ("trainer", "search_pairs", "search_eval", "search_compare", "search_report"):
        assert needed in kinds
    assert any(kind(c) == "trainer" and "configs/gsm8k_equiv.yaml" in c.argv for c in commands_in("docs/training.md"))
    assert "ensemble" in [kind(c) for c in commands_in("docs/training.md")]
