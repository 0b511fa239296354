"""The project's benchmarks (``make bench``); results and method in BENCHMARKS.md.

Benchmarks measure; tests assert behaviour. Nothing here runs under ``make test``. Each module
``bench_*.py`` exposes ``run(sizes) -> Section``; :mod:`benchmarks.run` runs them all and writes
the results block of BENCHMARKS.md.
"""
