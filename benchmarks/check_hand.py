"""Verify every hand-written gradient in workloads.py (and the peers' loss forms).

Each hand gradient is compared with fourth-order central finite differences along random
directions (each argument alone, then all together) and with HIPS autograd on the same
loss written with `autograd.numpy`; torch and jax, when importable, must agree too.
Everything is float64; the tolerance is 1e-6 relative.

    python benchmarks/check_hand.py [--only NAME[,NAME...]] [--tol 1e-6]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import workloads  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated workload names")
    parser.add_argument("--tol", type=float, default=1e-6)
    args = parser.parse_args(argv)

    selected = workloads.WORKLOADS
    if args.only:
        names = args.only.split(",")
        unknown = [n for n in names if n not in workloads.BY_NAME]
        if unknown:
            parser.error(f"unknown workload(s) {unknown}; known: {list(workloads.BY_NAME)}")
        selected = [workloads.BY_NAME[n] for n in names]

    rows = workloads.check(selected, tol=args.tol)
    failed = [r for r in rows if not r[3]]
    worst = max(rows, key=lambda r: r[2])
    print(f"\n{len(rows) - len(failed)}/{len(rows)} checks passed (tol {args.tol:g}); "
          f"worst: {worst[0]} {worst[1]} {worst[2]:.2e}")
    if failed:
        for name, what, err, _ in failed:
            print(f"FAILED {name}: {what} rel err {err:.2e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
