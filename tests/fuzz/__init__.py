"""A differential fuzzer of srcgrad (issue 10).

- `generator`: a seeded generator of NumPy programs over the README surface ("What
  compiled functions may contain"), written out as real module source text;
- `oracle`: runs one program through `sg.value_and_grad`, `sg.grad`, `sg.vjp` (also under
  saved-tensor hooks), `sg.jvp` and `sg.jacobian`, twice on the same shapes with different
  data, against central differences at two step sizes and HIPS autograd, and names the
  outcome; opt-in (`check(extra=oracle.OPT_IN)`, on in benchmarks/fuzz.py): `sg.grad`
  of the program on array_api_strict arrays;
- `shrink`: reduces a failing program to a small repro that fails the same way;
- `driver`: runs many programs with a per-program time limit, replays programs in a
  fresh process against the disk cache, and summarises.

`tests/fuzz/test_fuzz_slice.py` runs a fixed-seed slice in `pytest`;
`python benchmarks/fuzz.py` is the long run.
"""
