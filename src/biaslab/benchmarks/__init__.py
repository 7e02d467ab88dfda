"""One module per benchmark family. Each module exposes ``BENCHMARK``: a :class:`~biaslab.benchmarks.base.Benchmark`.

Which benchmarks run is data (``evaluation.benchmarks`` in params.yaml names the module of each), so
adding a benchmark is one module plus one params entry.
"""
