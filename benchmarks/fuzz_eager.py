"""A differential fuzz campaign of srcgrad's eager runtime (sg.Tensor, srcgrad/autograd/).

    python benchmarks/fuzz_eager.py --seed 0 --programs 5000 [--minutes 10] [--dir D]
        [--jobs 8] [--shrink-budget 30] [--no-shrink]
    python benchmarks/fuzz_eager.py --torch --seed 0 --programs 400   (where torch imports)

Generates torch-style programs from consecutive seeds (tests/eager_fuzz/generator.py),
judges each with tests/eager_fuzz/oracle.py (backward(), autograd.grad and second order
against central differences of the no_grad twin; by-design errors predicted from the
spec), and prints the counts per outcome, each failure class with its first seeds, and a
shrunk repro of each class (statements and output terms deleted while the program fails
the same way). With --dir, every failing program's source is written there as
seed_<N>.py, and each shrunk repro as class_<k>.py.

With --torch, the campaign is tests/eager_fuzz/kinks.py instead: one op of a row at a
kink or pole (0, -0, +-1, +-inf, ties), whose gradients (first and second order) must be
torch's; central differences cannot judge a kink. It needs torch importable (never a
dependency: run the script with a scratch environment's Python).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.eager_fuzz import oracle  # noqa: E402
from tests.eager_fuzz.generator import Program, generate  # noqa: E402


def _check_one(seed):
    try:
        return seed, oracle.check(generate(seed))
    except Exception as e:  # noqa: BLE001 - a bug of the generator/oracle: counted, not fatal
        return seed, oracle.Result("discarded", reason=f"oracle error: {type(e).__name__}: {e}")


def _results(seeds, jobs):
    if jobs <= 1:
        for seed in seeds:
            yield _check_one(seed)
        return
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap(_check_one, seeds, chunksize=4)


# ---------------------------------------------------------------- shrinking
def _blocks(lines, start):
    """(first, end) line ranges of the statements of f's body, innermost included."""
    out = []
    for i in range(start, len(lines)):
        line = lines[i]
        if not line.strip() or line.strip().startswith(("return", "watched = []")):
            continue
        if line.lstrip().startswith(("else:", "elif ")):
            continue
        indent = len(line) - len(line.lstrip())
        j = i + 1
        while j < len(lines) and (len(lines[j]) - len(lines[j].lstrip()) > indent or
                                  lines[j].lstrip().startswith("else:") and
                                  len(lines[j]) - len(lines[j].lstrip()) == indent and
                                  line.lstrip().startswith("if ")):
            j += 1
        out.append((i, j))
    return out


def _class_blocks(lines):
    out = []
    for i, line in enumerate(lines):
        if line.startswith("class "):
            j = i + 1
            while j < len(lines) and (not lines[j] or lines[j].startswith((" ", "\t"))):
                j += 1
            out.append((i, j))
    return out


def shrink(program: Program, failure, budget: float) -> Program:
    """Delete statements, output terms and unused classes while the failure stays."""
    sig = failure.signature()
    deadline = time.monotonic() + budget
    source = program.source

    def fails(text):
        p = Program(program.seed, text, program.shapes, program.expect, program.features)
        try:
            r = oracle.check(p, second=failure.check == "second", timeout=10)
        except Exception:  # noqa: BLE001
            return False
        return any(f.signature() == sig for f in r.failures)

    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        lines = source.splitlines()
        start = next(i for i, s in enumerate(lines) if s.startswith("def f("))
        for a, b in reversed(_blocks(lines, start + 1) + _class_blocks(lines)):
            if time.monotonic() > deadline:
                break
            cand = lines[:a] + lines[b:]
            if lines[a].strip().startswith("out = ") and not lines[a].strip().startswith(
                    "out = out"):
                if b < len(cand) + (b - a) and b < len(lines) and \
                        lines[b].strip().startswith("out = out + "):
                    cand = lines[:a] + ["    out = " + lines[b].strip()[len("out = out + "):]] \
                        + lines[b + 1:]
                else:
                    continue
            text = "\n".join(cand) + "\n"
            if fails(text):
                source, changed = text, True
                break
    return Program(program.seed, source, program.shapes, program.expect, program.features)


# ---------------------------------------------------------------- the campaign
def _torch_kinks(first_seed: int, programs: int) -> int:
    """One op at a kink or pole per program, sg.Tensor against torch (tests/eager_fuzz/
    kinks.py); torch is never a dependency: without it, nothing is judged."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("--torch: torch is not importable here; no kink is judged (install torch in a "
              "scratch environment and run this script with its Python)")
        return 0
    from tests.eager_fuzz import kinks

    os.environ.setdefault("SRCGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="sgcache-eager-"))
    counts, wrong = kinks.campaign(first_seed, programs)
    print(f"kinks and poles against torch, seeds {first_seed}..{first_seed + programs - 1}: "
          f"{counts}")
    for seed, expr, inputs, ours, theirs in wrong:
        print(f"  seed {seed}: {expr} at {inputs}\n    sg:    {ours}\n    torch: {theirs}")
    return 1 if counts["wrong"] else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--programs", type=int, default=5000)
    ap.add_argument("--minutes", type=float, default=None, help="stop after this many minutes")
    ap.add_argument("--dir", type=Path, default=None, help="failing programs and repros go here")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--shrink-budget", type=float, default=30.0, help="seconds per class")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--torch", action="store_true",
                    help="the kinks-and-poles campaign judged against torch, where importable")
    args = ap.parse_args(argv)
    if args.torch:
        return _torch_kinks(args.seed, args.programs)

    os.environ.setdefault("SRCGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="sgcache-eager-"))
    directory = args.dir or Path(tempfile.mkdtemp(prefix="srcgrad-eager-fuzz-"))
    directory.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 60 * args.minutes if args.minutes else None
    start = time.monotonic()
    counts = collections.Counter()
    reasons = collections.Counter()
    classes: dict = {}  # signature -> [seeds]
    first: dict = {}  # signature -> (seed, failure)
    total = 0
    print(f"eager fuzz: seeds {args.seed}..{args.seed + args.programs - 1}, programs in "
          f"{directory}", flush=True)
    try:
        for seed, result in _results(range(args.seed, args.seed + args.programs), args.jobs):
            total += 1
            counts[result.outcome] += 1
            if result.outcome in ("discarded", "by_design", "refused"):
                reasons[(result.outcome, result.reason.split(":")[0][:70])] += 1
            for f in result.failures:
                sig = f.signature()
                if sig not in classes:
                    classes[sig] = []
                    first[sig] = (seed, f)
                    print(f"new class {sig} at seed {seed}: {f.detail[:200]}", flush=True)
                    (directory / f"seed_{seed}.py").write_text(generate(seed).source)
                classes[sig].append(seed)
            if total % 500 == 0:
                print(f"{total} programs, {time.monotonic() - start:.0f}s: {dict(counts)}",
                      flush=True)
            if deadline is not None and time.monotonic() > deadline:
                print("time budget reached", flush=True)
                break
    except KeyboardInterrupt:
        print("interrupted: partial results", flush=True)
    minutes = (time.monotonic() - start) / 60
    print(f"\n{total} programs in {minutes:.1f} min (seeds {args.seed}..{args.seed + total - 1})")
    for k in ("pass", "wrong", "crash", "deviation", "by_design", "refused", "discarded"):
        print(f"  {k:10s} {counts[k]}")
    print("top reasons (by_design / refused / discarded):")
    for (outcome, why), n in reasons.most_common(12):
        print(f"  {n:5d} {outcome}: {why}")
    print(f"\nfailure classes: {len(classes)}")
    for k, (sig, seeds) in enumerate(classes.items()):
        print(f"  [{k}] {' | '.join(sig)}: {len(seeds)} programs, first seeds {seeds[:8]}")
    for k, sig in enumerate(classes):
        seed, failure = first[sig]
        program = generate(seed)
        # a deviation (no error where torch raises) is judged from the `# expect:` comment,
        # which deleting statements keeps: shrinking would delete the cause itself
        small = program if args.no_shrink or failure.outcome == "deviation" else \
            shrink(program, failure, args.shrink_budget)
        text = oracle.repro(small, failure)
        (directory / f"class_{k}.py").write_text(text)
        print(f"\n--- [{k}] {' | '.join(sig)} (seed {seed}, {len(program.source.splitlines())} "
              f"lines, shrunk to {len(small.source.splitlines())})\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
