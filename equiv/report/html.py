"""The self-contained report page: tables rendered here, trees rendered by inline script.

Everything is inline (CSS, JS, plots as base64 PNG, tree data as JSON) so the file can be
mailed, archived next to a paper draft, or opened on an air-gapped cluster: no CDN, no fetch,
no external font. All text that came from a run (step text, questions, answers, ids, names) is
escaped here with :func:`html.escape` or, inside the data block, by
:func:`equiv.report.tree_view.script_json`; the script inserts it with ``textContent`` only.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

import yaml

from equiv.report.load import Run
from equiv.report.stats import CompareRow, shared_ids
from equiv.report.tree_view import NODE_FIELDS, TreeSelection, script_json
from equiv.rundir import PAIRS as PAIRS_FILE
from equiv.rundir import read_pairs

PLOT_TITLES = {
    "tokens_per_problem": "Tokens per problem",
    "pruning_rate_by_depth": "Pruning rate by depth",
    "accuracy_vs_tokens": "Accuracy vs tokens",
}


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _fmt(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return "–" if value is None else f"{value:,.{digits}f}{suffix}"


def summary_table(rows: Sequence[CompareRow]) -> str:
    head = ("run", "algo", "pruner", "problems", "accuracy", "mean tokens", "token ratio",
            "errors", "PRM calls", "judge calls", "pruned / expansion")
    body = []
    for i, r in enumerate(rows):
        ratio = "baseline" if i == 0 else _fmt(r.token_ratio, 2, "%")
        shared = f"{r.problems}" + (f" <span class=muted>of {r.total_problems}</span>" if r.total_problems != r.problems else "")
        body.append(
            "<tr>" + "".join([
                f"<td>{esc(r.name)}</td>", f"<td>{esc(r.algo)}</td>", f"<td>{esc(r.pruner)}</td>",
                f"<td class=num>{shared}</td>", f"<td class=num>{_fmt(r.accuracy, 2, '%')}</td>",
                f"<td class=num>{_fmt(r.mean_tokens, 0)}</td>", f"<td class=num>{ratio}</td>",
                f"<td class=num>{r.errors}</td>", f"<td class=num>{_fmt(r.mean_prm_calls, 1)}</td>",
                f"<td class=num>{_fmt(r.mean_judge_calls, 1)}</td>", f"<td class=num>{_fmt(r.pruned_per_expansion, 2)}</td>",
            ]) + "</tr>"
        )
    return (
        '<table class="summary" id="summary-table"><thead><tr>'
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>"
        + '<dl class="muted columns" id="summary-columns">'
        + "".join(f"<dt>{esc(name)}</dt><dd>{esc(what)}</dd>" for name, what in COLUMNS.items()) + "</dl>"
    )


COLUMNS = {
    "problems": "problems the row's figures are computed on: those every run holds (of all the run holds)",
    "accuracy": "share of those problems answered right (an error counts as wrong)",
    "mean tokens": "tokens the policy generated per problem, every candidate counted, merged or dropped ones too",
    "token ratio": "mean tokens against the first run's (the baseline): below 100% the run generated fewer",
    "errors": "problems whose search stopped with an error (results.jsonl's error field)",
    "PRM calls": "reward-model scorings per problem",
    "judge calls": "pairs the equivalence judge's model scored per problem (pairs its rules decided are not counted)",
    "pruned / expansion": "candidate steps the pruner merged into an equivalent sibling, per expanded node "
                          "(all merged over all expansions; exact copies, dropped in every run, are not counted)",
}
"""What each summary column means, shown under the table."""


def plots_block(plots: dict[str, bytes | None], notes: dict[str, str]) -> str:
    cells = []
    for name, title in PLOT_TITLES.items():
        png = plots.get(name)
        if png is None:
            body = f'<div class="plot-note">{esc(notes.get(name, "no data"))}</div>'
        else:
            data = base64.b64encode(png).decode("ascii")
            body = f'<img alt="{esc(title)}" src="data:image/png;base64,{data}">'
        cells.append(f'<figure class="plot" id="plot-{name}">{body}<figcaption>{esc(title)} '
                     f'<span class=muted>(plots/{name}.png)</span></figcaption></figure>')
    return '<div class="plots">' + "".join(cells) + "</div>"


def judge_pairs_link(run: Run) -> str:
    """A link to the run's ``judge_pairs.jsonl`` (what the judge merged / kept apart near the
    threshold, :mod:`equiv.search.pairlog`) with its counts; empty when the run has none.

    Read through the run directory's reader (:func:`equiv.rundir.read_pairs`): a torn last line
    is dropped, any other malformed line is a one-line error naming file and line."""
    path = Path(run.path) / PAIRS_FILE
    if not path.is_file():
        return ""
    pairs, _torn = read_pairs(path)
    counts = {kind: sum(1 for p in pairs if p.get("kind") == kind) for kind in ("merged", "kept_apart")}

    def reasons(kind: str) -> str:
        found: dict[str, int] = {}
        for p in pairs:
            if p.get("kind") == kind and p.get("reason"):
                found[str(p["reason"])] = found.get(str(p["reason"]), 0) + 1
        return " (" + ", ".join(f"{esc(r)} {n}" for r, n in sorted(found.items())) + ")" if found else ""

    return (f'<a href="{esc(path.resolve().as_uri())}">{PAIRS_FILE}</a>: {counts["merged"]} merged pair(s)'
            f'{reasons("merged")}, {counts["kept_apart"]} kept apart near the threshold or by a rule'
            f'{reasons("kept_apart")}')


def runs_block(runs: Sequence[Run]) -> str:
    parts = []
    for run in runs:
        facts = [f"path <code>{esc(run.path)}</code>", f"{len(run.results)} problems",
                 f"{len(run.trees)} saved trees" if run.trees else "no saved trees"]
        if run.duplicates:
            facts.append(f"{run.duplicates} earlier record(s) superseded by a later one for the same problem")
        if run.torn:
            facts.append("a torn last line of results.jsonl (run interrupted mid-write) was left out")
        if len(run.seeds) > 1:
            facts.append(f"seeds {sorted(run.seeds, key=str)}")
        if run.summary is None:
            facts.append("no summary.json (run unfinished?)")
        pairs = judge_pairs_link(run)
        if pairs:
            facts.append(pairs)
        extra = ""
        if run.summary:
            extra += "<pre>" + esc(yaml.safe_dump(run.summary, sort_keys=False, allow_unicode=True)) + "</pre>"
        if run.config:
            extra += "<details><summary>config.yaml</summary><pre>" + esc(
                yaml.safe_dump(run.config, sort_keys=False, allow_unicode=True)) + "</pre></details>"
        parts.append(f"<details class=run><summary><b>{esc(run.name)}</b> · {' · '.join(facts)}</summary>{extra}</details>")
    return "".join(parts)


def problems_table(runs: Sequence[Run], tree_ids: set[str]) -> str:
    """Every problem of every run: correctness and tokens side by side, a link to its tree."""
    ids: list[str] = []
    seen: set[str] = set()
    for run in runs:
        for pid in run.results:
            if pid not in seen:
                seen.add(pid)
                ids.append(pid)
    head = "<th>problem</th>" + "".join(f"<th>{esc(r.name)}</th>" for r in runs)
    rows = []
    for pid in ids:
        cells = []
        for i, run in enumerate(runs):
            rec = run.results.get(pid)
            if rec is None:
                cells.append("<td class=muted>–</td>")
                continue
            mark = '<span class="ok">✓</span>' if rec["correct"] else '<span class="bad">✗</span>'
            err = f' <span class="bad" title="{esc(rec.get("error"))}">error</span>' if rec.get("error") else ""
            tokens = f'{rec["generated_tokens"]:,}'
            if pid in tree_ids and pid in run.trees:
                tokens = f'<a href="#run={i}&amp;problem={esc(quote(pid, safe=""))}">{tokens} tokens · tree</a>'
            else:
                tokens += " tokens"
            cells.append(f"<td>{mark} {tokens}{err}</td>")
        rows.append(f"<tr><td>{esc(pid)}</td>{''.join(cells)}</tr>")
    return ('<table class="problems"><thead><tr>' + head + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def render_page(
    *,
    title: str,
    runs: Sequence[Run],
    rows: Sequence[CompareRow],
    plots: dict[str, bytes | None],
    plot_notes: dict[str, str],
    selection: TreeSelection,
    trees: list[dict[str, Any]],
    collapse_depth: int,
    analysis: str = "",
    banner: str = "",
) -> str:
    """The whole page as one string. ``trees[i]`` maps problem id -> tree payload for ``runs[i]``;
    ``banner``: plain text shown above the summary (the tour's models, :mod:`equiv.report.banner`)."""
    data = {
        "fields": list(NODE_FIELDS),
        "collapseDepth": collapse_depth,
        "runs": [{"name": run.name, "algo": run.algo, "pruner": run.pruner, "trees": t} for run, t in zip(runs, trees)],
        "order": selection.ids,
    }
    n_shared = len(shared_ids(runs))
    if selection.available == 0:
        tree_note = "No run has saved trees (run <code>search_cli.py eval</code> with <code>--run.save_trees true</code>)."
    elif selection.omitted:
        why = (f", {selection.over_budget} left out to keep the page small (<code>--max_mb</code>)"
               if selection.over_budget else "")
        tree_note = (f"Showing trees for {len(selection.ids)} of {selection.available} problems "
                     f"(those with the most judge merges{why}); choose others with <code>--problems ID,ID</code> "
                     "or raise <code>--max_trees</code>.")
    else:
        tree_note = f"Trees for all {selection.available} problems with saved trees."
    return PAGE.format(
        title=esc(title),
        css=CSS,
        js=JS,
        data=script_json(data),
        subtitle=esc(f"{len(runs)} run(s), {n_shared} shared problem(s); ratios against the first run"),
        banner=f'<p class="banner" id="tour-banner">{esc(banner)}</p>' if banner else "",
        summary=summary_table(rows),
        analysis=(f"<section id=\"analysis\"><h2>Failure-mode analysis</h2>{analysis}</section>" if analysis else ""),
        plots=plots_block(plots, plot_notes),
        runs=runs_block(runs),
        tree_note=tree_note,
        problems=problems_table(runs, set(selection.ids)),
    )


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
<header><h1>{title}</h1><div class="muted">{subtitle}</div></header>
{banner}<section><h2>Summary</h2>{summary}</section>
{analysis}
<section><h2>Plots</h2>{plots}</section>
<section id="trees"><h2>Search trees</h2>
<p class="muted">{tree_note}</p>
<div class="controls" id="tree-controls">
  <label>run <select id="run-select"></select></label>
  <label>problem <select id="problem-select"></select></label>
  <button type="button" id="prev-problem">&#9664;</button><button type="button" id="next-problem">&#9654;</button>
  <button type="button" id="expand-all">expand all</button>
  <button type="button" id="collapse-all">collapse all</button>
  <button type="button" id="path-only">chosen path</button>
</div>
<div class="legend"><span class="chip path">chosen path</span> <span class="chip merged">merged into the step above (judge probability p · the reason: identical, threshold)</span>
 <span class="chip">V PRM value · N visits · T tokens · P prior</span></div>
<div id="tree-header"></div>
<div id="tree-view"><p class="muted">No tree to show.</p></div>
</section>
<section><h2>Runs</h2>{runs}</section>
<section><details><summary><h2 class="inline">Problems</h2></summary>{problems}</details></section>
<script type="application/json" id="report-data">{data}</script>
<script>{js}</script>
</body>
</html>
"""

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1400px;padding:16px 24px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:4px 0}h2{font-size:17px;margin:22px 0 8px;border-bottom:1px solid #e3e6eb;padding-bottom:4px}
h2.inline{display:inline;border:0}
.banner{background:#fff7ed;border:1px solid #fdba74;padding:8px 12px;border-radius:4px}.muted{color:#6b7280}.ok{color:#15803d;font-weight:600}.bad{color:#b91c1c;font-weight:600}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #e3e6eb;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f6f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
table.summary tbody tr:first-child{background:#fafbfd}
.plots{display:flex;flex-wrap:wrap;gap:12px}.plot{margin:0;flex:1 1 360px;max-width:520px;border:1px solid #e3e6eb;border-radius:6px;padding:6px;background:#fff}
.plot img{display:block;width:100%;height:auto}.plot figcaption{font-size:12px;text-align:center}
.plot-note{height:300px;display:flex;align-items:center;justify-content:center;text-align:center;color:#6b7280;background:#f7f8fa}
.controls{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin:6px 0}
.controls select{max-width:520px}button{font:inherit;padding:2px 8px;border:1px solid #c8ced8;border-radius:4px;background:#f7f8fa;cursor:pointer}
.legend{font-size:12px;margin:4px 0 8px}.chip{display:inline-block;padding:0 6px;border-radius:4px;border:1px solid #d5d9e0;background:#f7f8fa}
.chip.path{background:#fff4cc;border-color:#e6b800}.chip.merged{background:#eef0ff;border-color:#8b93e6}
#tree-header{background:#f7f8fa;border:1px solid #e3e6eb;border-radius:6px;padding:8px 10px;margin-bottom:8px;white-space:pre-wrap}
ul.tree,ul.children,ul.merged-list{list-style:none;margin:0;padding-left:22px}ul.tree{padding-left:0}
li.node{margin:2px 0;position:relative}
ul.children>li.node::before{content:"";position:absolute;left:-13px;top:0;bottom:0;border-left:1px solid #d5d9e0}
.row{display:flex;gap:6px;align-items:flex-start;padding:2px 4px;border-radius:4px;border:1px solid transparent}
li.on-path>.row{background:#fff4cc;border-color:#e6b800}
li.terminal>.row .text::after{content:" \\25A0";color:#6b7280}
.toggle{width:18px;flex:none;padding:0;border:0;background:none;color:#4b5563}
.toggle.leaf{visibility:hidden}
.text{white-space:pre-wrap;word-break:break-word;flex:1;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px;cursor:pointer}
.text.clamp{display:-webkit-box;-webkit-line-clamp:3;-webkit-box-orient:vertical;overflow:hidden}
.badges{flex:none;display:flex;gap:4px;font-size:11.5px;font-variant-numeric:tabular-nums}
.badge{padding:0 5px;border-radius:3px;background:#eef1f5;color:#374151;white-space:nowrap}
.badge.v{background:#e0f2e9}.badge.p{background:#eef0ff;color:#3730a3;font-weight:600}.badge.d{background:#f1f1f1;color:#555}
li.collapsed>ul.children{display:none}
.merged-group{margin:2px 0 4px 24px;padding:2px 6px;border-left:3px solid #8b93e6;background:#f6f7ff;border-radius:0 4px 4px 0}
.merged-group>.mg-title{font-size:12px;color:#3730a3}
li.merged>.row{opacity:.85}
.path-only li.node:not(.on-path){display:none}.path-only li.on-path>.merged-group li.node{display:block}
details.run{margin:4px 0}details.run pre{background:#f7f8fa;padding:6px;font-size:12px;overflow:auto}
"""

JS = r"""
(function(){
"use strict";
const DATA = JSON.parse(document.getElementById("report-data").textContent);
const F = {}; DATA.fields.forEach(function(name, i){ F[name] = i; });
const runSel = document.getElementById("run-select");
const probSel = document.getElementById("problem-select");
const view = document.getElementById("tree-view");
const header = document.getElementById("tree-header");

function el(tag, cls, text){
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function fmt(x, d){ return (x === null || x === undefined) ? "–" : Number(x).toFixed(d); }

function runsWithTrees(){
  return DATA.runs.map(function(r, i){ return i; }).filter(function(i){ return Object.keys(DATA.runs[i].trees).length > 0; });
}

function fillRuns(){
  runSel.textContent = "";
  runsWithTrees().forEach(function(i){
    const o = el("option", null, DATA.runs[i].name + " (" + DATA.runs[i].algo + ", pruner " + DATA.runs[i].pruner + ")");
    o.value = String(i); runSel.appendChild(o);
  });
}

function mostMerged(runIdx){
  // Open on the problem where the judge merged most: that is what a reader came to see.
  const trees = DATA.runs[runIdx].trees; let best = null;
  DATA.order.forEach(function(pid){ const t = trees[pid]; if (t && (best === null || t.merged > trees[best].merged)) best = pid; });
  return best;
}

function fillProblems(runIdx, keep){
  probSel.textContent = "";
  const trees = DATA.runs[runIdx].trees;
  DATA.order.forEach(function(pid){
    const t = trees[pid]; if (!t) return;
    const mark = t.correct === true ? "✓" : (t.correct === false ? "✗" : "?");
    const o = el("option", null, pid + "  " + mark + "  · " + t.merged + " merged" + (t.duplicates ? " (+" + t.duplicates + " dup)" : "") + " · " + t.nodes.length + " nodes" +
      (t.tokens !== null && t.tokens !== undefined ? " · " + t.tokens + " tokens" : ""));
    o.value = pid; probSel.appendChild(o);
  });
  if (keep !== undefined && trees[keep]) probSel.value = keep;
}

function badges(n, merged, reason){
  const b = el("span", "badges");
  if (merged && n[F.duplicate]) b.appendChild(el("span", "badge d", "= exact duplicate"));
  else if (merged) b.appendChild(el("span", "badge p", (n[F.judge_prob] === null ? "≡ p=–" : "≡ p=" + fmt(n[F.judge_prob], 3))
                                     + (reason ? " · " + reason : "")));
  b.appendChild(el("span", "badge v", "V " + fmt(n[F.value], 3)));
  b.appendChild(el("span", "badge", "N " + n[F.visits]));
  b.appendChild(el("span", "badge", "T " + n[F.tokens]));
  if (n[F.prior] !== null) b.appendChild(el("span", "badge", "P " + fmt(n[F.prior], 3)));
  return b;
}

function setCollapsed(li, yes){
  if (!yes && li._fill) li._fill();
  li.classList.toggle("collapsed", yes);
  const b = li.querySelector(":scope > .row > .toggle");
  if (b) b.textContent = yes ? "▸" : "▾";
}

function renderTree(tree){
  const byId = new Map(), kids = new Map(), mergedUnder = new Map();
  tree.nodes.forEach(function(n){ byId.set(n[F.id], n); });
  tree.nodes.forEach(function(n){
    const m = n[F.merged_into];
    const target = m !== null ? mergedUnder : kids;
    const key = m !== null ? m : n[F.parent];
    if (key === null) return;
    if (!target.has(key)) target.set(key, []);
    target.get(key).push(n);
  });
  const collapseDepth = DATA.collapseDepth;

  function node(n, isMerged){
    const li = el("li", "node");
    li.dataset.nodeId = n[F.id]; li.dataset.depth = n[F.depth];
    if (n[F.on_path]) li.classList.add("on-path");
    if (n[F.terminal]) li.classList.add("terminal");
    if (isMerged){
      li.classList.add("merged");
      if (n[F.duplicate]) li.classList.add("duplicate");
      li.dataset.mergedInto = n[F.merged_into];
      if (n[F.judge_prob] !== null) li.dataset.judgeProb = n[F.judge_prob];
    }
    const children = kids.get(n[F.id]) || [];
    const row = el("div", "row");
    const tog = el("button", "toggle" + (children.length ? "" : " leaf"), "▾");
    tog.type = "button";
    tog.addEventListener("click", function(){ setCollapsed(li, !li.classList.contains("collapsed")); });
    row.appendChild(tog);
    let text = n[F.text];
    if (n[F.parent] === null && !text) text = "(root) " + (tree.question || "");
    const t = el("span", "text clamp", text === "" ? "(empty step)" : text);
    t.title = "click to show the whole step";
    t.addEventListener("click", function(){ t.classList.toggle("clamp"); });
    row.appendChild(t);
    row.appendChild(badges(n, isMerged, (tree.reasons || {})[String(n[F.id])]));
    li.appendChild(row);
    const merged = mergedUnder.get(n[F.id]) || [];
    if (merged.length){
      const g = el("div", "merged-group");
      g.dataset.representative = n[F.id];
      const dups = merged.filter(function(m){ return m[F.duplicate]; }).length;
      const judged = merged.length - dups;
      const parts = [];
      if (judged) parts.push(judged + " sibling(s) merged into this step by the judge");
      if (dups) parts.push(dups + " exact duplicate(s)");
      g.appendChild(el("div", "mg-title", "≡ " + parts.join(", ")));
      const ul = el("ul", "merged-list");
      merged.forEach(function(m){ ul.appendChild(node(m, true)); });
      g.appendChild(ul); li.appendChild(g);
    }
    if (children.length){
      // A collapsed subtree is built on first expand: a 10k-node MCTS tree opens instantly.
      const ul = el("ul", "children");
      li.appendChild(ul);
      let pending = true;
      li._fill = function(){ if (pending){ pending = false; children.forEach(function(c){ ul.appendChild(node(c, false)); }); } };
      if (n[F.depth] >= collapseDepth && !n[F.on_path]) setCollapsed(li, true); else li._fill();
    }
    return li;
  }

  const root = el("ul", "tree");
  tree.nodes.forEach(function(n){ if (n[F.parent] === null && n[F.merged_into] === null) root.appendChild(node(n, false)); });
  return root;
}

function show(runIdx, pid){
  const run = DATA.runs[runIdx]; const tree = run && run.trees[pid];
  view.textContent = ""; header.textContent = "";
  if (!tree){ view.appendChild(el("p", "muted", "No saved tree for this problem in this run.")); return; }
  header.appendChild(el("b", null, "Problem " + pid + " — " + run.name));
  header.appendChild(document.createTextNode("\n" + (tree.question || "")));
  const verdict = tree.correct === true ? "correct" : (tree.correct === false ? "wrong" : "not graded");
  header.appendChild(el("div", tree.correct ? "ok" : "bad",
    "answer: " + tree.answer + "   prediction: " + tree.prediction + "   (" + verdict + ")   " +
    tree.nodes.length + " nodes, " + tree.merged + " merged by the judge, " + tree.duplicates + " exact duplicates"));
  const t = renderTree(tree);
  t.id = "tree-root"; t.dataset.problem = pid; t.dataset.run = runIdx;
  view.appendChild(t);
}

function current(){ return [Number(runSel.value), probSel.value]; }
function update(push){
  const c = current(); show(c[0], c[1]);
  if (push) history.replaceState(null, "", "#run=" + c[0] + "&problem=" + encodeURIComponent(c[1]));
}
function fromHash(){
  const h = new URLSearchParams(location.hash.replace(/^#/, ""));
  const r = h.get("run"), p = h.get("problem");
  if (r !== null && DATA.runs[Number(r)] && Object.keys(DATA.runs[Number(r)].trees).length){
    runSel.value = r; fillProblems(Number(r), p === null ? undefined : p);
    update(false);
    document.getElementById("trees").scrollIntoView();
    return true;
  }
  return false;
}

const withTrees = runsWithTrees();
if (!withTrees.length){ document.getElementById("tree-controls").style.display = "none"; return; }
fillRuns();
// Start on the first run with pruning if there is one: that is where merged nodes are.
let start = withTrees[0];
withTrees.forEach(function(i){ if (start === withTrees[0] && DATA.runs[withTrees[0]].pruner === "none" && DATA.runs[i].pruner !== "none") start = i; });
runSel.value = String(start);
fillProblems(start, mostMerged(start));
if (!fromHash()) update(false);
runSel.addEventListener("change", function(){ const keep = probSel.value; fillProblems(Number(runSel.value), keep); update(true); });
probSel.addEventListener("change", function(){ update(true); });
document.getElementById("prev-problem").addEventListener("click", function(){ if (probSel.selectedIndex > 0){ probSel.selectedIndex -= 1; update(true); } });
document.getElementById("next-problem").addEventListener("click", function(){ if (probSel.selectedIndex < probSel.options.length - 1){ probSel.selectedIndex += 1; update(true); } });
document.getElementById("expand-all").addEventListener("click", function(){
  view.classList.remove("path-only");
  let closed;
  while ((closed = view.querySelectorAll("li.collapsed")).length) closed.forEach(function(li){ setCollapsed(li, false); });
});
document.getElementById("collapse-all").addEventListener("click", function(){
  view.classList.remove("path-only");
  view.querySelectorAll("li.node").forEach(function(li){ if (li._fill && !li.classList.contains("on-path")) setCollapsed(li, true); });
});
document.getElementById("path-only").addEventListener("click", function(){ view.classList.toggle("path-only"); });
window.addEventListener("hashchange", fromHash);
})();
"""
