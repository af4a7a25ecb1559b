"""Markdown tables of ``bench_novelty.py`` from its results, and their place in
docs/benchmarks.md (between the ``novelty-tables`` markers of the "Novelty and outliers"
section; the text around the markers is kept)."""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path
from typing import Any

from _novelty_data import FAMILIES
from _novelty_metrics import median_over_sets, sets_below_reference

#: the detectors in table order
SYSTEMS = ("streamkm", "streamkm distance", "IsolationForest", "LOF", "HalfSpaceTrees")
#: the references of the floors: streamkm against the best of these on each set
REFERENCES = ("IsolationForest", "HalfSpaceTrees")
BEGIN, END = "<!-- novelty-tables -->", "<!-- /novelty-tables -->"


def _f(value: float, digits: int = 3) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _column(sets: list[dict], system: str, key: str) -> list[float]:
    return [s["systems"][system][key] for s in sets]


def summary_table(sets: list[dict]) -> str:
    """Medians over the sets per detector and the count of sets below the reference."""
    refs = [_column(sets, r, "auc") for r in REFERENCES]
    lines = ["| detector | median ROC-AUC | median precision at the flagged rate | median "
             "precision at the anomaly rate | sets > 0.05 below the best of IsolationForest "
             "and HalfSpaceTrees | CPU per record (us), median over sets |",
             "|---|---:|---:|---:|---:|---:|"]
    for system in SYSTEMS:
        auc = _column(sets, system, "auc")
        below = len(sets_below_reference(auc, refs))
        lines.append(
            f"| {system} | {_f(median_over_sets(auc))} "
            f"| {_f(median_over_sets(_column(sets, system, 'p_at_flagged')))} "
            f"| {_f(median_over_sets(_column(sets, system, 'p_at_anomaly_rate')))} "
            f"| {below} of {len(sets)} "
            f"| {median_over_sets(_column(sets, system, 'us_per_record')):,.0f} |")
    return "\n".join(lines)


def family_of(name: str) -> str:
    """The family a set belongs to: a KEEL family, a thinned set, or its own name."""
    for family in FAMILIES:
        if name.startswith(family):
            return family
    return name


def family_table(sets: list[dict]) -> str:
    """Median ROC-AUC per family of sets (KEEL families; thinned and generated sets alone)."""
    groups: dict[str, list[dict]] = {}
    for s in sets:
        groups.setdefault(family_of(s["name"]), []).append(s)
    lines = ["| family | sets | " + " | ".join(SYSTEMS) + " |",
             "|---|---:|" + "---:|" * len(SYSTEMS)]
    for family, members in groups.items():
        cells = [_f(median_over_sets(_column(members, system, "auc"))) for system in SYSTEMS]
        lines.append(f"| {family} | {len(members)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: row-count bands of the by-size table: (label, lowest n, highest n + 1)
SIZES = (("fewer than 500 rows", 0, 500), ("500 to 1,999 rows", 500, 2000),
         ("2,000 rows or more", 2000, None))


def size_table(sets: list[dict]) -> str:
    """Median ROC-AUC per band of set sizes, with streamkm's share of records scored 1.0
    (a model without enough recent members, or records no farther than all of them)."""
    lines = ["| sets | count | records with novelty 1.0 (streamkm), median | "
             + " | ".join(SYSTEMS) + " |", "|---|---:|---:|" + "---:|" * len(SYSTEMS)]
    for label, lo, hi in SIZES:
        members = [s for s in sets if s["n"] >= lo and (hi is None or s["n"] < hi)]
        if not members:
            continue
        cells = [_f(median_over_sets(_column(members, system, "auc"))) for system in SYSTEMS]
        ones = median_over_sets([s["novelty_one"] for s in members])
        lines.append(f"| {label} | {len(members)} | {ones:.0%} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_set_table(sets: list[dict]) -> str:
    """ROC-AUC and precision at the flagged rate of every detector on every set."""
    short = {"streamkm": "skm", "streamkm distance": "skm dist", "IsolationForest": "IF",
             "LOF": "LOF", "HalfSpaceTrees": "HST"}
    head = ("| set | n | d | anomalies | W | flagged | inliers flagged | novelty 1.0 | "
            + " | ".join(f"AUC {short[s]}" for s in SYSTEMS) + " | "
            + " | ".join(f"P@flag {short[s]}" for s in SYSTEMS) + " |")
    lines = [head, "|---|" + "---:|" * (7 + 2 * len(SYSTEMS))]
    for s in sets:
        best = max(s["systems"][r]["auc"] for r in REFERENCES)
        aucs = []
        for system in SYSTEMS:
            cell = _f(s["systems"][system]["auc"])
            if system == "streamkm" and s["systems"][system]["auc"] < best - 0.05:
                cell = f"**{cell}**"
            aucs.append(cell)
        precisions = [_f(s["systems"][system]["p_at_flagged"]) for system in SYSTEMS]
        lines.append(
            f"| {s['name']} | {s['n']:,} | {s['d']} | {s['anomalies']} "
            f"({s['anomalies'] / s['n']:.1%}) | {s['window']} | {s['flag_rate']:.1%} "
            f"| {s['inliers_flagged']:.1%} | {s['novelty_one']:.0%} | " + " | ".join(aucs) + " | "
            + " | ".join(precisions) + " |")
    return "\n".join(lines)


def floors_table(results: dict[str, Any]) -> str:
    """The floors of the novelty score and where they stand."""
    sets = results["sets"]
    ours = _column(sets, "streamkm", "auc")
    ref_medians = {r: median_over_sets(_column(sets, r, "auc")) for r in REFERENCES}
    best_ref = max(ref_medians, key=ref_medians.get)
    below = sets_below_reference(ours, [_column(sets, r, "auc") for r in REFERENCES])
    mine = median_over_sets(ours)
    ratios = novelty_cost_ratios(results["cost"])
    calib = results["calibration"]
    alpha = results["meta"]["alpha"]
    shares = [row[mode] for row in calib for mode in ("fixed", "drift")]
    inside = sum(alpha / 2 <= v <= 2 * alpha for v in shares)
    nm = results["new_mode"]
    births_inliers = sum(row["births"] for row in calib) + nm["births_before_appearance"]

    def met(ok: bool) -> str:
        return "**met**" if ok else "**not met**"

    birth = ("no `born` event in the run" if nm["first_birth_after_window"] is None
             else f"{nm['windows_to_birth']} windows after the flagged rows reached "
                  f"{nm['reach']}")
    lines = ["| floor | result |", "|---|---|",
             f"| median ROC-AUC >= the best of IsolationForest and HalfSpaceTrees "
             f"| {met(mine >= ref_medians[best_ref])}: {_f(mine)} against "
             f"{_f(ref_medians[best_ref])} ({best_ref}) |",
             f"| no set more than 0.05 below the better of the two on it "
             f"| {met(not below)}: {len(below)} of {len(sets)} sets |",
             f"| cost of the novelty score <= 5% of the step (this engine with the score "
             f"switched off) "
             f"| {met(all(r[0] <= 1.05 for _, r in ratios))}: "
             + "; ".join(f"{r[0]:.3f}x ({r[1]:.3f}-{r[2]:.3f}) at {shape}" for shape, r in ratios)
             + " |",
             f"| flagged share within [alpha/2, 2 alpha] on streams without anomalies "
             f"| {met(inside == len(shares))}: {inside} of {len(shares)} runs |",
             f"| a new mode becomes a cluster within 5 windows of reaching the birth size "
             f"| {met(nm['windows_to_birth'] is not None and nm['windows_to_birth'] <= 5)}: "
             f"{birth} |",
             f"| no birth on streams without a new mode "
             f"| {met(births_inliers == 0)}: {births_inliers} births |"]
    return "\n".join(lines)


def cost_table(cost: dict[str, Any]) -> str:
    """CPU per record of a step per contender and shape, and the ratio to the first."""
    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    def ratio(r: list[float] | None) -> str:
        return "-" if r is None else f"{r[0]:.3f} ({r[1]:.3f}-{r[2]:.3f})"

    first = cost["configs"][0]["contenders"][0]["name"]
    lines = [f"| k | b | d | step | CPU per record (us), median (min-max) | / {first} "
             "| / novelty score switched off |",
             "|---:|---:|---:|---|---:|---:|---:|"]
    for row in cost["configs"]:
        for c in row["contenders"]:
            lines.append(f"| {row['k']} | {row['b']:,} | {row['d']} | {c['name']} "
                         f"| {cell(c['us_per_record'])} | {ratio(c['ratio'])} "
                         f"| {ratio(c.get('ratio_to_off'))} |")
    return "\n".join(lines)


def novelty_cost_ratios(cost: dict[str, Any]) -> list[tuple[str, list[float]]]:
    """Per shape, the ratio of the step with ``outlier_alpha`` set to the same engine with
    the novelty score switched off (to the first contender in runs without that one)."""
    return [(f"k={row['k']}, b={row['b']}, d={row['d']}",
             row["contenders"][-1].get("ratio_to_off", row["contenders"][-1]["ratio"]))
            for row in cost["configs"]]


def new_mode_table(nm: dict[str, Any]) -> str:
    """The windows of the new-mode stream from two before the appearance to the birth
    (or ten after the appearance without one)."""
    windows = nm["windows"]
    first = next(i for i, w in enumerate(windows) if w["start"] >= nm["appears_at"])
    last = first + 10
    for later in (nm["first_birth_after_window"], nm.get("first_change_after_window")):
        if later is not None:
            last = max(last, later + 2)
    lines = ["| window | first record | new-mode rows | new-mode rows flagged | other rows "
             "flagged | clusters | events |", "|---:|---:|---:|---:|---:|---:|---|"]
    for i in range(max(0, first - 2), min(len(windows), last + 1)):
        w = windows[i]
        born = ", ".join([f"born (id {e.get('cluster_id', '?')})" for e in w["born"]]
                         + [_change(e) for e in w.get("changes", [])])
        mark = " (reached)" if i == nm["reached_at_window"] else ""
        lines.append(f"| {i}{mark} | {w['start']:,} | {w['new_rows']} | {w['new_flagged']} "
                     f"| {w['old_flagged']} of {w['old_rows']} | {w['clusters']} | {born} |")
    before = windows[:first]
    after = windows[first:]
    old_before = sum(w["old_flagged"] for w in before) / max(1, sum(w["old_rows"] for w in before))
    old_after = sum(w["old_flagged"] for w in after) / max(1, sum(w["old_rows"] for w in after))
    new_rows = sum(w["new_rows"] for w in after)
    new_flagged = sum(w["new_flagged"] for w in after)
    share = new_flagged / max(1, new_rows)
    lines += ["", f"Before the new mode: {old_before:.2%} of the records flagged. After it: "
              f"{new_flagged} of its {new_rows} rows flagged ({share:.1%}), "
              f"{old_after:.2%} of the other records."]
    return "\n".join(lines)


def _change(event: dict[str, Any]) -> str:
    """A split, merge or retirement as the new-mode table prints it."""
    kind = event["event"]
    if kind == "split":
        return f"split {event.get('cluster')} into {event.get('into')}"
    if kind == "merge":
        return f"merge {event.get('clusters')} into {event.get('into')}"
    return f"{kind} {event.get('cluster', '')}".strip()


def ari_table(rows: list[dict[str, Any]]) -> str:
    """Inlier ARI with the two outlier policies."""
    lines = ["| stream | n | k | W | exclude, prequential | learn, prequential "
             "| exclude, final model | learn, final model |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['n']:,} | {r['n_clusters']} | {r['window']} "
                     f"| {_f(r['exclude']['prequential'])} | {_f(r['learn']['prequential'])} "
                     f"| {_f(r['exclude']['final'])} | {_f(r['learn']['final'])} |")
    return "\n".join(lines)


def calibration_table(rows: list[dict[str, Any]], alpha: float) -> str:
    """Flagged share on streams without anomalies."""
    lines = [f"| stream | n | W | flagged, fixed k | flagged, drift handling | births "
             f"| within [{alpha / 2:g}, {2 * alpha:g}] |", "|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ok = all(alpha / 2 <= r[m] <= 2 * alpha for m in ("fixed", "drift"))
        lines.append(f"| {r['name']} | {r['n']:,} | {r['window']} | {r['fixed']:.2%} "
                     f"| {r['drift']:.2%} | {r['births']} | {'yes' if ok else 'no'} |")
    return "\n".join(lines)


def render(results: dict[str, Any]) -> str:
    """Every table of a run, with its date, load and settings."""
    meta = results["meta"]
    sets = results["sets"]
    settings = sets[0]["settings"]
    cost = results["cost"]
    nm = results["new_mode"]
    parts = [
        f"Run of {meta['date']}, load average {meta['load_start']} at the start and "
        f"{meta['load_end']} at the end, {meta['wall_s']:.0f} s wall, {meta['cpu_s']:.0f} s "
        f"CPU of the main process, streamkm {meta['streamkm']}"
        + (", quick" if meta["quick"] else "")
        + f". outlier_alpha = {meta['alpha']:g}. Detector settings: "
        + "; ".join(f"{name}: {setting}" for name, setting in settings.items() if setting)
        + " (n_clusters as the set gives it).",
        "### Floors", floors_table(results),
        f"### ROC-AUC and precision over {len(sets)} data sets", summary_table(sets),
        "### By size (median ROC-AUC)", size_table(sets),
        "### By family (median ROC-AUC)", family_table(sets),
        "### Cost of the novelty score",
        f"rbf with a fixed gamma, {cost['mode']}, 1 thread, one worker process per contender; "
        f"{cost['repeats']} interleaved repeats of {cost['steps']} steps, process CPU time. "
        + (f"Engine before the novelty score: commit {cost['baseline_rev'][:10]}."
           if cost["baseline_rev"] else "No engine before the novelty score in this history."),
        cost_table(cost),
        "### A new mode half-way",
        f"{nm['n']:,} records, windows of {nm['window']}, the new mode from record "
        f"{nm['appears_at']:,}; {nm['setting']}. The rows flagged since the appearance reach "
        f"{nm['reach']} in window "
        + (str(nm["reached_at_window"]) if nm["reached_at_window"] is not None else "(never)")
        + "; births before the appearance: " + str(nm["births_before_appearance"])
        + "; first split, merge or retirement after it: "
        + (f"window {nm['first_change_after_window']}"
           if nm.get("first_change_after_window") is not None else "none") + ".",
        new_mode_table(nm),
        "### Inlier ARI: outliers excluded from the centers or learnt",
        ari_table(results["ari"]),
        "### Flagged share on streams without anomalies (after 5 windows)",
        calibration_table(results["calibration"], meta["alpha"]),
        "### Every data set",
        "Bold: streamkm's ROC-AUC more than 0.05 below the better of IsolationForest and "
        "HalfSpaceTrees on the set. flagged: streamkm's share of flagged records; inliers "
        "flagged: its share among the normal records; novelty 1.0: streamkm's share of records "
        "scored 1.0 (the model held fewer recent members than the score needs, or the record "
        "was as close to its center as all the members it was scored against).",
        per_set_table(sets),
    ]
    return "\n\n".join(parts)


def write_docs(path: Path, tables: str) -> None:
    """Put ``tables`` between the novelty-tables markers of ``path``."""
    text = path.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path} has no {BEGIN!r} ... {END!r} block to write the tables into")
    path.write_text(pattern.sub(lambda _: f"{BEGIN}\n{tables}\n{END}", text, count=1))
