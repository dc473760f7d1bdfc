"""The tour's figures in ``docs/getting-started.md`` are what the tour prints today.

The page shows the figures of one tour run (tokens, ratio, PRM calls per run) in a table under a
``tour-figures`` marker. The fast tests check that they are figures ``compare`` could print (the
ratio is the tokens over the first row's; the rows are the tour's two run directories) and that
README shows the same tour commands as the page. The ``slow`` test runs the set-up fit and the
tour's commands, as written on the page, in a scratch checkout with no ``../shared`` beside it
(the tour must run anywhere), and compares ``compare``'s printed table with the documented
figures: counts exactly, means to within 2% (another CPU may round a float differently; a changed
search, policy or judge moves them by far more).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "getting-started.md"
LINKED = ("equiv", "configs", "trainer_cli.py", "search_cli.py", "pyproject.toml")


@dataclass(frozen=True)
class Row:
    """One run's row of ``search_cli.py compare``'s table."""

    run: str
    algo: str
    pruner: str
    problems: int
    accuracy: float
    tokens: float
    ratio: float
    prm_calls: float
    judge_calls: float
    errors: int


def parse_table(text: str) -> list[Row]:
    """The rows of a ``compare`` table (the lines after the ``----`` rule)."""
    lines = text.strip().splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("----"))
    rows = []
    for line in lines[rule + 1:]:
        w = line.split()
        if len(w) != 10:
            break
        rows.append(Row(w[0], w[1], w[2], int(w[3]), float(w[4]), float(w[5]), float(w[6]), float(w[7]),
                        float(w[8]), int(w[9])))
    return rows


MARKER = "<!-- tour-figures:"


@dataclass(frozen=True)
class Figures:
    """One run's documented figures: the columns of the page's tour table."""

    run: str
    pruner: str
    problems: int
    tokens: float
    ratio: float
    prm_calls: float


def documented_figures() -> list[Figures]:
    """The Markdown table under the page's ``tour-figures`` marker."""
    lines = PAGE.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(MARKER)]
    assert len(starts) == 1, f"{PAGE}: expected one {MARKER!r} marker above the tour's table"
    rows = []
    for line in lines[starts[0] + 3:]:
        if not line.startswith("|"):
            break
        c = [cell.strip() for cell in line.strip("|").split("|")]
        rows.append(Figures(c[0], c[1], int(c[2]), float(c[3]), float(c[4]), float(c[5])))
    return rows


TOUR_END = "## A real result on your CPU"
"""README's tour ends where the real result (a 1.1 GB policy, minutes a problem) begins."""


def shell_commands(doc: Path) -> list[list[str]]:
    """The commands of a page's ``bash`` blocks before :data:`TOUR_END` (continuations joined,
    ``&&`` split)."""
    out = []
    for body in re.findall(r"```bash\n(.*?)```", doc.read_text().split(TOUR_END)[0], flags=re.S):
        for line in body.replace("\\\n", " ").splitlines():
            words, part = shlex.split(line, comments=True), []
            for w in [*words, "&&"]:
                if w == "&&":
                    if part:
                        out.append(part)
                    part = []
                else:
                    part.append(w)
    return out


def tour(doc: Path) -> list[list[str]]:
    """The set-up fit and the tour's ``search_cli.py`` commands of a page, in order."""
    cmds = shell_commands(doc)
    fit = next(c for c in cmds if c[1:3] == ["trainer_cli.py", "fit"])
    return [fit] + [c for c in cmds if c[1:2] == ["search_cli.py"] and c[2] in ("pairs", "eval", "compare", "report")]


def test_the_documented_figures_are_ones_compare_could_print():
    rows = documented_figures()
    assert [r.run for r in rows] == ["runs/demo_base", "runs/demo_pruned"]
    assert [r.pruner for r in rows] == ["none", "model"]
    assert all(r.problems == 3 for r in rows)
    for r in rows:
        assert r.ratio == pytest.approx(100 * r.tokens / rows[0].tokens, abs=0.1), r  # tokens are rounded


FIT_LINE = re.compile(r"^    (best validation epoch: .*)$", re.M)
"""The demo fit's last line as the pages show it (an indented block)."""

FIT_PAGES = (PAGE, REPO_ROOT / "docs" / "training.md")


def documented_fit_line() -> str:
    """The demo fit's closing line that Getting started shows (Training shows the same one)."""
    lines = [m for page in FIT_PAGES for m in FIT_LINE.findall(page.read_text())]
    assert len(lines) == len(FIT_PAGES) and len(set(lines)) == 1, lines
    return lines[0]


def fit_figures(line: str) -> dict[str, float]:
    """``{"f1": ..., ..., "epoch": N}`` of a ``best validation epoch: f1=... (epoch N)`` line."""
    figures = {name: float(value) for name, value in re.findall(r"(\w+)=([0-9.]+)", line)}
    figures["epoch"] = float(re.search(r"\(epoch (\d+)\)", line).group(1))
    return figures


def test_the_documented_fit_line_is_one_fit_prints():
    """The pages show the fit's line as ``format_metrics`` prints it: every metric to 4 decimals, in
    its order, and the epoch (before: "f1=0.99 ... (epoch 1)", which no fit prints)."""
    from equiv.judge.cli import format_metrics

    line = documented_fit_line()
    assert format_metrics("best validation epoch", fit_figures(line)) == line


def test_readme_and_the_page_show_the_same_tour():
    """One real run of the page's tour stands for README's too."""
    assert tour(REPO_ROOT / "README.md") == tour(PAGE)


def scratch_checkout(root: Path) -> Path:
    """``root/work`` laid out like a fresh clone, with no ``../shared`` beside it."""
    work = root / "work"
    work.mkdir(parents=True)
    for name in LINKED:
        (work / name).symlink_to(REPO_ROOT / name)
    return work


@pytest.mark.slow
@pytest.mark.timeout(3600)  # the demo fit and two searches: minutes each on a loaded 2-core CPU
def test_the_tour_prints_what_the_page_shows(tmp_path: Path):
    work = scratch_checkout(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", WANDB_MODE="offline", EQUIV_SHARED_DATA=str(tmp_path / "no_shared"))
    printed = {}
    for argv in tour(PAGE):
        res = subprocess.run([sys.executable, *argv[1:]], cwd=work, env=env, capture_output=True, text=True,
                             timeout=1800)
        assert res.returncode == 0, f"{shlex.join(argv)}\n{res.stderr[-3000:]}"
        printed[argv[2]] = res.stdout
    assert not (tmp_path / "shared").exists()
    fitted = [line for line in printed["fit"].splitlines() if line.startswith("best validation epoch: ")]
    assert len(fitted) == 1, printed["fit"][-3000:]
    got_fit, want_fit = fit_figures(fitted[0]), fit_figures(documented_fit_line())
    assert got_fit["epoch"] == want_fit["epoch"], f"the fit printed {fitted[0]!r}, {PAGE.name} shows {documented_fit_line()!r}"
    assert got_fit == pytest.approx(want_fit, abs=0.01), f"the fit printed {fitted[0]!r}, {PAGE.name} shows {documented_fit_line()!r}"
    got, want = parse_table(printed["compare"]), documented_figures()
    assert [(r.run, r.pruner, r.problems, r.errors) for r in got] == [(w.run, w.pruner, w.problems, 0) for w in want], \
        printed["compare"]
    for g, w in zip(got, want):
        for name in ("tokens", "ratio", "prm_calls"):
            assert getattr(g, name) == pytest.approx(getattr(w, name), rel=0.02, abs=0.05), \
                f"{g.run} {name}: the tour printed {getattr(g, name)}, {PAGE.name} shows {getattr(w, name)}\n{printed['compare']}"
    assert (work / "runs" / "report" / "index.html").exists()
