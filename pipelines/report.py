"""DVC stage ``report``: side-by-side tables of all variants, a bias-vs-accuracy plot, logged to MLflow.

    python -m pipelines.report --params params.yaml

Reads ``metrics/<variant>.json``, ``reports/tables/<variant>/`` and ``runs/register.json``; writes
``reports/report.md``, ``reports/{summary,bias_vs_accuracy}.csv``,
``reports/bias_vs_accuracy.{json,png}`` and ``reports/side_by_side/`` (see src/biaslab/reporting/report.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from biaslab.tracking import runs as tracking
from biaslab.config import Params, load_params
from biaslab.outputs import paths
from biaslab.reporting.report import write_report
from pipelines.stage.entry import option, stage_main
from pipelines.stage.profile import disabled_names


def main(argv: list[str] | None = None) -> int:
    return stage_main("report", __doc__, run, argv,
                      option("--accuracy", default=None,
                             help="x axis of the bias-vs-accuracy plot (default: tune.accuracy_metric)"),
                      option("--bias", default=None, help="y axis of the bias-vs-accuracy plot (default: tune.gap_metric)"))


def run(args: argparse.Namespace) -> None:
    from biaslab.reporting.summary import print_summary

    params = load_params(args.params)
    files = run_report(params, ".", accuracy=args.accuracy, bias=args.bias)
    for name, why in disabled_names(params).items():  # their metrics files say so; the report lists them
        print(f"report: {name} has no numbers: {why}")
    print(f"report -> {files.report_md}")
    print_summary(params, ".", workers=None)  # the last stage of dvc repro: one screen of what came out (every CPU)


def run_report(params: Params, root: str | os.PathLike[str] = ".", *, accuracy: str | None = None,
               bias: str | None = None) -> paths.ReportFiles:
    """Write the report (:func:`biaslab.reporting.report.write_report`) and log every file of it in a ``report`` run."""
    files = write_report(params, root, accuracy=accuracy, bias=bias)
    tracking.configure(params.tracking, root=Path(root))
    with tracking.stage_run("report", tags={"variants": ",".join(params.variants)}):
        for path in (files.report_md, files.summary_csv, files.bias_vs_accuracy_csv, files.bias_vs_accuracy_json,
                     files.bias_vs_accuracy_png, files.comparison_md, files.comparison_html):
            if path is not None:
                tracking.log_artifact(path, "report")
        if any(files.side_by_side_dir.iterdir()):
            tracking.log_artifact(files.side_by_side_dir, "report/side_by_side")
        if any(files.paper_dir.iterdir()):
            tracking.log_artifact(files.paper_dir, "report/paper")
    return files


if __name__ == "__main__":
    sys.exit(main())
