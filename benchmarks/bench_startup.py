"""How long a command takes before it does anything: the start-up cost of ``streamkm``.

Each measurement is the wall time of a fresh interpreter running one of:

* ``import numpy`` (the floor every numeric command pays),
* ``import streamkm`` (bare import: no estimator used),
* ``python -m streamkm --version`` (the console script's fastest path),
* ``python -m streamkm --help``,
* ``python -m streamkm config check -c FILE`` and ``config show -c FILE`` on a small file-source
  configuration with no checkpoint yet (written to a temporary folder, metrics off so that
  no port is probed),
* ``import streamkm; streamkm.MiniBatchKernelKMeans`` (first use of an estimator:
  scikit-learn, scipy and numba are loaded),
* the first ``MiniBatchKernelKMeans(3).fit(X)`` of the process on 5,000 x 5 standard
  normal rows (defaults: ``kernel="rbf"``, ``gamma="auto"``, so the automatic kernel choice
  runs; numba's cache is warm after the uncounted first round): this case reports the time
  of the ``fit`` call alone, measured inside the process,

interleaved (every case once per repeat, in turn), so load from elsewhere hits all cases
alike. With ``--tree DIR`` (repeatable) each source tree (a checkout holding the ``streamkm``
package, e.g. a ``git worktree`` of another commit) is measured in the same interleaved
loop, by putting it first on ``PYTHONPATH``.

Usage::

    python benchmarks/bench_startup.py --repeats 7
    python benchmarks/bench_startup.py --tree . --tree ../other-checkout --repeats 7
    python benchmarks/bench_startup.py --tree . --tree ../other-checkout --repeats 7 \
        --case help --case check --case show

``--case`` (repeatable) measures only the named cases (default: all): ``numpy``,
``import``, ``version``, ``help``, ``check``, ``show``, ``estimator``, ``first-fit``.

Prints one markdown table: median (min-max) seconds per case and tree, and the goal each
case is held against (``--version`` <= 0.2 s, ``import streamkm`` <= 0.4 s on an idle
machine; the first fit < 1.5 s on 2 busy cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Prints the seconds of the process's first fit (the last line of its output).
FIRST_FIT = ("import time, numpy as np, streamkm\n"
             "X = np.random.default_rng(0).normal(size=(5000, 5))\n"
             "model = streamkm.MiniBatchKernelKMeans(3, random_state=0)\n"
             "t0 = time.perf_counter(); model.fit(X); print(time.perf_counter() - t0)\n")

#: The configuration ``config check`` / ``config show`` read (``{folder}``: where it is).
CONFIG = """[source]
paths = ["{folder}/in.jsonl"]
[decoding]
dim = 2
[model]
n_clusters = 4
[checkpoint]
dir = "{folder}/checkpoints"
[sinks]
assignments = "{folder}/out/assignments.jsonl"
events = "{folder}/out/events.jsonl"
dead_letter = "{folder}/out/dead_letter.jsonl"
[metrics]
enabled = false
"""

#: (key, label, interpreter arguments, goal in seconds or None, whether the process reports
#: its own time on its last output line instead of being timed whole); ``{config}`` in the
#: arguments is the configuration file (:data:`CONFIG`).
CASES: list[tuple[str, str, list[str], float | None, bool]] = [
    ("numpy", "import numpy", ["-c", "import numpy"], None, False),
    ("import", "import streamkm", ["-c", "import streamkm"], 0.4, False),
    ("version", "streamkm --version", ["-m", "streamkm", "--version"], 0.2, False),
    ("help", "streamkm --help", ["-m", "streamkm", "--help"], None, False),
    ("check", "streamkm config check -c FILE",
     ["-m", "streamkm", "config", "check", "-c", "{config}"], None, False),
    ("show", "streamkm config show -c FILE",
     ["-m", "streamkm", "config", "show", "-c", "{config}"], None, False),
    ("estimator", "first estimator use",
     ["-c", "import streamkm; streamkm.MiniBatchKernelKMeans"], None, False),
    ("first-fit", "first fit (5,000 x 5, in-process)", ["-c", FIRST_FIT], 1.5, True),
]


def wall_seconds(args: list[str], tree: Path, reports: bool = False) -> float:
    """Wall time of ``python ARGS`` with ``tree`` first on the import path (``reports``:
    the seconds the process prints last instead)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, cwd=tree, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    wall = time.perf_counter() - t0
    return float(done.stdout.split()[-1]) if reports else wall


def measure(trees: list[Path], repeats: int, cases: list[tuple[str, str, list[str],
                                                                float | None, bool]],
            config: Path) -> dict[tuple[str, Path], list[float]]:
    """Seconds per (case, tree), interleaved; one warm-up round is not counted (it fills
    the file cache and writes the byte-code caches)."""
    def run(args: list[str], tree: Path, reports: bool) -> float:
        return wall_seconds([a.replace("{config}", str(config)) for a in args], tree, reports)

    for _, label, args, _, reports in cases:
        for tree in trees:
            run(args, tree, reports)
    times: dict[tuple[str, Path], list[float]] = {}
    for _ in range(repeats):
        for _, label, args, _, reports in cases:
            for tree in trees:
                times.setdefault((label, tree), []).append(run(args, tree, reports))
    return times


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def table(times: dict[tuple[str, Path], list[float]], trees: list[Path],
          cases: list[tuple[str, str, list[str], float | None, bool]]) -> str:
    """The markdown table of ``times``."""
    head = "| command | " + " | ".join(f"`{t}` s" for t in trees) + " | goal |"
    rule = "|---|" + "---|" * len(trees) + "---|"
    rows = [head, rule]
    for _, label, _, goal, _ in cases:
        cells = " | ".join(_fmt(times[(label, tree)]) for tree in trees)
        rows.append(f"| `{label}` | {cells} | {'<= %.1f s' % goal if goal else '-'} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", type=Path,
                        help="source tree holding the streamkm package (repeatable; "
                             "default: this checkout)")
    parser.add_argument("--repeats", type=int, default=7, help="rounds (>= 5)")
    parser.add_argument("--case", action="append", choices=[case[0] for case in CASES],
                        help="measure only this case (repeatable; default: all)")
    args = parser.parse_args(argv)
    if args.repeats < 5:
        parser.error(f"--repeats must be >= 5, got {args.repeats}")
    cases = [case for case in CASES if args.case is None or case[0] in args.case]
    trees = [t.resolve() for t in (args.tree or [Path(__file__).resolve().parent.parent])]
    for tree in trees:
        if not (tree / "streamkm" / "__init__.py").is_file():
            parser.error(f"--tree {str(tree)!r} holds no streamkm package")
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "streamkm.toml"
        config.write_text(CONFIG.format(folder=folder))
        times = measure(trees, args.repeats, cases, config)
    after = os.getloadavg()
    print(f"{args.repeats} repeats, interleaved; load average {load[0]:.1f} at the start, "
          f"{after[0]:.1f} at the end / {os.cpu_count()} CPUs; {sys.version.split()[0]}\n")
    print(table(times, trees, cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
