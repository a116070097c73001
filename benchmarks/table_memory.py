"""Peak memory of reading a large CSV and of ``dpopt fit`` on it (issue 22).

    python benchmarks/table_memory.py                   # generates /tmp/dpopt_table_memory.csv
    python benchmarks/table_memory.py --rows 200000     # a quick run on a small file
    python benchmarks/table_memory.py --skip-fit        # the read only

The file (generated once, not committed): numeric columns (two with 10% missing cells), two
string columns with 3 and 40 values, a string label. Each measurement runs in a fresh
subprocess and reports its peak resident set size (``ru_maxrss``); the ratio is the peak
above the interpreter's own footprint (Python + pandas + dpopt imported, measured the same
way) divided by the size of the file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

DEFAULT_PATH = "/tmp/dpopt_table_memory.csv"
COLORS = ("red", "green", "blue")
CITIES = tuple(f"city{i:02d}" for i in range(40))


def generate(path, rows, seed=0, block=200_000):
    """Write the CSV block by block (the generator itself stays small)."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        f.write("age,hours,income,score,visits,balance,color,city,label\n")
        for start in range(0, rows, block):
            m = min(block, rows - start)
            age = rng.integers(18, 90, m)
            hours = rng.integers(1, 99, m)
            income = np.round(rng.lognormal(10, 1, m), 2)
            score = np.round(rng.normal(0, 1, m), 4)
            visits = rng.poisson(3, m)
            balance = np.round(rng.normal(1000, 500, m), 2)
            color = rng.choice(COLORS, m)
            city = rng.choice(CITIES, m)
            s = 0.03 * (age - 50) + (color == "red") + 0.5 * score + rng.standard_normal(m)
            label = np.where(s > 0, "yes", "no")
            income_txt = np.where(rng.random(m) < 0.1, "", income.astype(str))
            score_txt = np.where(rng.random(m) < 0.1, "", score.astype(str))
            cols = [age.astype(str), hours.astype(str), income_txt, score_txt,
                    visits.astype(str), balance.astype(str), color, city, label]
            lines = [",".join(row) for row in zip(*cols)]
            f.write("\n".join(lines) + "\n")


CHILD_READ = """
import resource, sys
import pandas, dpopt
from dpopt.cli.tables import read_table
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if sys.argv[1] != "-":
    X, y, name, _ = read_table(sys.argv[1], target="label")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(base, peak)
"""


def child_peak(args):
    """(interpreter footprint KiB, peak KiB, seconds) of a child running CHILD_READ."""
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD_READ, *args], check=True,
                         capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1]), time.perf_counter() - t


CHILD_FIT = """
import resource, sys
from dpopt.cli.commands import main
rc = main(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(rc)
"""


def fit_peak(path, epsilon=1.0):
    """(peak KiB, seconds) of ``dpopt fit`` in a child."""
    cmd = [sys.executable, "-c", CHILD_FIT, "fit", path, "--target", "label", "--loss",
           "logistic", "--epsilon", str(epsilon), "--seed", "0"]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"dpopt fit failed:\n{proc.stderr}")
    print(proc.stdout.strip())
    return int(proc.stderr.split()[-1]), seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--path", default=DEFAULT_PATH)
    parser.add_argument("--rows", type=int, default=4_400_000)
    parser.add_argument("--skip-fit", action="store_true")
    parser.add_argument("--generate-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.generate_only:
        return generate(args.path, args.rows)
    if not os.path.exists(args.path):
        print(f"generating {args.path} ({args.rows} rows) ...", flush=True)
        # in a child: a forked child inherits its parent's peak RSS (Linux ru_maxrss)
        subprocess.run([sys.executable, __file__, "--generate-only", "--path", args.path,
                        "--rows", str(args.rows)], check=True)
    size = os.path.getsize(args.path) / 2 ** 20
    base, _, _ = child_peak(["-"])
    _, peak, seconds = child_peak([args.path])
    base_mb, peak_mb = base / 1024, peak / 1024
    print(f"file: {args.path}, {size:.0f} MB")
    print(f"interpreter (python + pandas + dpopt): {base_mb:.0f} MB")
    print(f"read: peak {peak_mb:.0f} MB, {(peak_mb - base_mb) / size:.2f}x the file above the "
          f"interpreter ({peak_mb / size:.2f}x in all), {seconds:.1f} s")
    if not args.skip_fit:
        peak, seconds = fit_peak(args.path)
        peak_mb = peak / 1024
        print(f"dpopt fit: peak {peak_mb:.0f} MB, {(peak_mb - base_mb) / size:.2f}x the file "
              f"above the interpreter ({peak_mb / size:.2f}x in all), {seconds:.1f} s")


if __name__ == "__main__":
    main()
