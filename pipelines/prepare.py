"""DVC stage ``prepare``: validate the raw datasets and write ``data/prepared/`` (docs/data.md).

    python -m pipelines.prepare --params params.yaml

Exits non-zero with a message naming the file, row and column when the input data are bad; the
report (rows read / dropped / fixed per file) is also logged to MLflow as ``prepare_report.json``, and each
raw dataset folder read as a dataset input (context ``raw``, digest = DVC's, source = mirror or pinned origin,
tagged with the md5 of the ``raw_data`` record ``data/raw_inputs/datasets.json`` this stage depends on).
"""

from __future__ import annotations

import argparse
import sys

from biaslab.tracking import runs as tracking
from biaslab.config import load_params
from biaslab.data.prepare import REPORT_FILE, prepare
from biaslab.tracking.datasets import raw_datasets
from biaslab.outputs import paths
from pipelines.stage.entry import stage_main


def main(argv: list[str] | None = None) -> int:
    return stage_main("prepare", __doc__, run, argv)


def run(args: argparse.Namespace) -> None:
    params = load_params(args.params)
    report = prepare(params)
    tracking.configure(params.tracking)
    with tracking.stage_run("prepare"):
        tracking.log_params({"data": params.data.model_dump()})
        tracking.log_dict(report, REPORT_FILE)
        heldout = params.data.lm_heldout  # the corpora are read for lm_quality's held-out text only
        tracking.log_datasets(raw_datasets(params.data, corpora=bool(heldout.languages) and not heldout.texts_dir,
                                           record=paths.raw_inputs_file("datasets")))
    print(f"prepared {sum(report['tables'].values())} rows in {len(report['tables'])} tables "
          f"-> {params.data.prepared_dir}")


if __name__ == "__main__":
    sys.exit(main())
