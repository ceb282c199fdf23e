"""The long differential fuzz run of srcgrad (issue 10).

    python benchmarks/fuzz.py --programs 10000 --seed 0 --jobs 1 [--minutes 15]
        [--timeout 30] [--shrink-budget 90] [--findings FILE] [--replay 50] [--boundary 0.3]

Generates programs from consecutive seeds (tests/fuzz/generator.py), checks each one with
tests/fuzz/oracle.py (its default transforms and, unless --extra says otherwise, the opt-in
ones: sg.grad on array_api_strict arrays, two-deep compositions, complex arguments
that must be refused; tests/fuzz/compose.py), with --boundary of the seeds drawing the
boundary grammar (tests/fuzz/boundary.py), and prints counts of pass / wrong / crash / refused / hang /
discarded, the refused share and its top reasons, and, for each distinct failure class
(oracle.Failure.signature), a shrunk repro. Ctrl-C (or the --minutes budget) stops the run
and reports what was done. With --findings, each new failure class is appended to that
markdown file as it is found. --replay N re-checks N passing programs in a fresh process
against the disk cache this run filled.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzz import driver, oracle, shrink  # noqa: E402
from tests.fuzz.generator import generate  # noqa: E402


def _check_one(job):
    seed, directory, timeout, extra = job
    try:
        return seed, oracle.check(generate(seed), Path(directory), timeout=timeout, extra=extra)
    except Exception as e:  # noqa: BLE001 - a bug of the references (srcgrad's own errors are
        # judged inside oracle.check): the long run goes on, and counts it
        return seed, oracle.Result("discarded", reason=f"oracle error: {type(e).__name__}")


def _results(seeds, directory, timeout, jobs, extra):
    if jobs <= 1:
        for seed in seeds:
            yield _check_one((seed, directory, timeout, extra))
        return
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap_unordered(_check_one, [(s, directory, timeout, extra) for s in seeds])


def _section(sig, seeds, program, failure, shrunk, directory) -> str:
    text = oracle.repro(shrunk, failure, directory)
    return (f"\n### {' | '.join(map(str, sig))}\n\n"
            f"- transform: `{failure.transform}` ({failure.call}); outcome: **{failure.outcome}**\n"
            f"- detail: {failure.detail}\n- seeds so far: {seeds[:8]} (program seed {program.seed}, "
            f"{len(program.source.splitlines())} lines, shrunk to {len(shrunk.source.splitlines())})\n\n"
            f"```python\n{text}\n```\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=None, help="stop after this many minutes")
    ap.add_argument("--timeout", type=float, default=30.0, help="per transform call, seconds (hang)")
    ap.add_argument("--shrink-budget", type=float, default=90.0, help="seconds per failure class")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--findings", type=Path, default=None, help="append each new failure class here")
    ap.add_argument("--replay", type=int, default=20, help="passing programs to replay in a fresh process")
    ap.add_argument("--dir", type=Path, default=None, help="where program modules are written")
    ap.add_argument("--boundary", type=float, default=0.3,
                    help="share of the boundary grammar (tests/fuzz/boundary.py: a call of any "
                         "table row, index objects and call forms); 0 for the curated grammar only")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--log", type=Path, default=None, help="one JSON line per program")
    ap.add_argument("--extra", default=",".join(oracle.OPT_IN),
                    help="opt-in transforms to run too, comma-separated ('' for none; default: "
                         "all of oracle.OPT_IN, which the CI slice does not run)")
    args = ap.parse_args(argv)

    os.environ["SRCGRAD_FUZZ_BOUNDARY"] = str(args.boundary)  # read by generate(), replay too
    os.environ.setdefault("SRCGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="sgcache-fuzz-"))
    directory = args.dir or Path(tempfile.mkdtemp(prefix="srcgrad-fuzz-"))
    directory.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 60 * args.minutes if args.minutes else None
    seeds = range(args.seed, args.seed + args.programs)
    tally = driver.Tally()
    shrunk: dict = {}
    passing = []
    start = time.monotonic()
    print(f"programs in {directory}, cache {os.environ['SRCGRAD_CACHE_DIR']}", flush=True)
    try:
        extra = tuple(name for name in args.extra.split(",") if name)
        for seed, result in _results(seeds, directory, args.timeout, args.jobs, extra):
            tally.add(seed, result)
            tally.seconds = time.monotonic() - start
            if args.log:
                with open(args.log, "a") as fh:
                    fh.write(json.dumps({"seed": seed, "outcome": result.outcome, "reason": result.reason,
                                         "seconds": round(result.seconds, 2),
                                         "failures": [[f.transform, f.call, f.outcome, f.detail]
                                                      for f in result.failures]}) + "\n")
            if result.outcome == "pass":
                passing.append(seed)
            for failure in result.failures:
                sig = failure.signature()
                if failure.outcome in ("refused", "by_design") or sig in shrunk:
                    continue
                program = generate(seed)
                budget = args.shrink_budget
                if deadline is not None:  # the --minutes budget covers the shrinking too
                    budget = min(budget, max(5.0, deadline - time.monotonic()))
                small = program if args.no_shrink else shrink.shrink(
                    program, failure, directory, budget=budget, timeout=args.timeout)
                shrunk[sig] = (program, failure, small)
                section = _section(sig, tally.classes[sig], program, failure, small, directory)
                if not args.quiet:
                    print(section, flush=True)
                if args.findings:
                    with open(args.findings, "a") as fh:
                        fh.write(section)
            if not args.quiet and tally.total % 25 == 0:
                print(tally.report().splitlines()[0], flush=True)
            if deadline is not None and time.monotonic() > deadline:
                print("time budget reached", flush=True)
                break
    except KeyboardInterrupt:
        print("interrupted: partial results", flush=True)
    if args.replay and passing:
        picked = passing[:: max(1, len(passing) // args.replay)][: args.replay]
        try:
            replayed = driver.replay(directory, picked, timeout=args.timeout)
            bad = {s: v for s, v in replayed.items() if v[0] != "pass"}
            print(f"fresh-process replay of {len(picked)} passing programs (data B before A, disk cache): "
                  f"{len(picked) - len(bad)} pass" + "".join(f"\n  seed {s}: {v}" for s, v in bad.items()))
        except Exception as e:  # noqa: BLE001 - the replay must not lose the run's report
            print(f"replay failed: {type(e).__name__}: {e}")
    print("\n" + tally.report(top=10))
    judged = tally.total - tally.counts["discarded"]
    if judged:
        print(f"refused share: {100 * tally.counts['refused'] / judged:.1f}% of judged programs")
        print(f"raises by design: {tally.counts['by_design']} programs (a write reached a value a "
              "custom Function saved, as the NumPy run shows: torch raises too; not counted as refused)")
    print("\nshrunk repros, one per failure class:")
    for sig, (_program, _failure, small) in shrunk.items():
        print(f"\n--- {' | '.join(map(str, sig))} ({len(tally.classes[sig])} programs)\n{small.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
