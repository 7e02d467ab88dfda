"""A benchmark that never finishes: the kill test's deterministic "mid-way" point.

Listed last in a test's params, it runs after the real benchmarks have computed their metrics; it
touches ``$BIASLAB_TEST_BLOCK_MARKER`` (so the test knows the stage is inside its MLflow run with
results in memory) and then sleeps until the test kills the process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


class BlockingBenchmark:
    name = "blocking"
    language = "en"

    def run(self, lm, prepared_dir, options, ctx):  # noqa: ARG002 - the Benchmark protocol
        Path(os.environ["BIASLAB_TEST_BLOCK_MARKER"]).touch()
        time.sleep(600)
        raise RuntimeError("the test should have killed this process")


BENCHMARK = BlockingBenchmark()
