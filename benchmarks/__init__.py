"""srcgrad benchmarks: side-by-side timings vs hand-written NumPy and peers (see README.md)."""
