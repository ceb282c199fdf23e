"""Running many generated programs: counts, failure classes, fresh-process replay.

`python -m tests.fuzz.driver replay DIR SEED...` is the fresh process of a replay: it
loads the programs already written to DIR and checks them again against the disk cache
the first process filled (`$SRCGRAD_CACHE_DIR`), calling data set B before A.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz import oracle
from tests.fuzz.generator import generate


@dataclass
class Tally:
    counts: collections.Counter = field(default_factory=collections.Counter)
    refused: collections.Counter = field(default_factory=collections.Counter)
    discarded: collections.Counter = field(default_factory=collections.Counter)
    per_transform: collections.Counter = field(default_factory=collections.Counter)
    classes: dict = field(default_factory=dict)  # signature -> [seeds]
    first: dict = field(default_factory=dict)  # signature -> (seed, Failure)
    seconds: float = 0.0

    def add(self, seed: int, result: oracle.Result) -> None:
        self.counts[result.outcome] += 1
        if result.outcome == "discarded":
            self.discarded[result.reason] += 1
        failed = {f.transform for f in result.failures}
        for name in result.transforms:  # each transform's outcome, passes too
            if name not in failed:
                self.per_transform[(name, "pass")] += 1
        for f in result.failures:
            self.per_transform[(f.transform, f.outcome)] += 1
            if f.outcome in ("refused", "by_design"):  # not failure classes (oracle)
                continue
            sig = f.signature()
            seeds = self.classes.setdefault(sig, [])
            if not seeds or seeds[-1] != seed:
                seeds.append(seed)
            self.first.setdefault(sig, (seed, f))
        if result.outcome == "refused":
            self.refused[result.failures[0].detail] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def report(self, top: int = 8) -> str:
        n = self.total
        judged = n - self.counts["discarded"]
        lines = [f"{n} programs in {self.seconds:.0f} s: " + ", ".join(
            f"{k} {self.counts[k]}" for k in oracle.OUTCOMES)]
        if judged:
            shares = [f"{k} {100 * self.counts[k] / judged:.1f}%"
                      for k in ("pass", "by_design", "wrong", "crash", "refused", "hang")]
            lines.append(f"of {judged} judged programs: " + ", ".join(shares))
        if self.refused:
            lines.append("top refusal reasons:")
            lines += [f"  {c:5d}  {r}" for r, c in self.refused.most_common(top)]
        if self.discarded:
            lines.append("discarded because:")
            lines += [f"  {c:5d}  {r}" for r, c in self.discarded.most_common(top)]
        if self.per_transform:
            lines.append("outcomes per transform (programs): " + ", ".join(
                f"{t}/{o} {c}" for (t, o), c in sorted(self.per_transform.items())))
        if self.classes:
            lines.append(f"{len(self.classes)} failure classes (signature: count, first seeds):")
            for sig, seeds in sorted(self.classes.items(), key=lambda kv: -len(kv[1])):
                lines.append(f"  {len(seeds):4d}  {' | '.join(map(str, sig))}  seeds {seeds[:6]}")
        return "\n".join(lines)


def run_seeds(seeds, directory: Path, *, timeout: float = 30.0, deadline: float | None = None,
              on_result=None, tally: Tally | None = None) -> Tally:
    """Check each seed's program in this process; stops at the deadline (time.monotonic())."""
    tally = tally or Tally()
    start = time.monotonic()
    for seed in seeds:
        if deadline is not None and time.monotonic() > deadline:
            break
        program = generate(seed)
        result = oracle.check(program, directory, timeout=timeout)
        tally.add(seed, result)
        tally.seconds = time.monotonic() - start
        if on_result is not None:
            on_result(seed, program, result)
    return tally


def replay(directory: Path, seeds, *, timeout: float = 60.0) -> dict:
    """{seed: outcome, failures} from a fresh Python process reading the same disk cache."""
    cmd = [sys.executable, "-m", "tests.fuzz.driver", "replay", str(directory), *map(str, seeds)]
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env,
                          timeout=timeout * max(1, len(seeds)))
    if done.returncode != 0:
        raise RuntimeError(f"replay process failed:\n{done.stderr[-3000:]}")
    return {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def _replay_main(directory: str, seeds) -> None:
    out = {}
    for seed in seeds:
        program = generate(int(seed))
        result = oracle.check(program, Path(directory), order=("B", "A"))
        out[seed] = [result.outcome,
                     [f"{f.transform} {f.call}: {f.outcome}: {f.detail}" for f in result.failures]]
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "replay":
        _replay_main(sys.argv[2], sys.argv[3:])
    else:
        raise SystemExit("usage: python -m tests.fuzz.driver replay DIR SEED...")
