"""What the pipeline writes to disk: one module per file format, and one place for output paths.

* :mod:`~biaslab.outputs.paths` - the fixed output paths (``metrics/``, ``runs/``, predictions, tables);
* :mod:`~biaslab.outputs.metrics_file` - ``metrics/<variant>.json`` (value, direction, ideal, CI per
  metric, plus the model that produced them) and ``metrics/values/<variant>.json`` (values only, for DVC);
* :mod:`~biaslab.outputs.variant_dir` - a variant directory: ``variant.json``, the set of files that
  make up a model, and its fingerprint;
* :mod:`~biaslab.outputs.run_file` - ``runs/<stage>.json``, the small record each stage leaves for
  the stages after it (a stage DVC skips creates no MLflow run, so this is how they find its results).

Every reader and writer of these files (stage scripts, evaluation, mitigations, registry, report, ``biaslab`` CLI, tests)
goes through these modules. Named ``outputs`` (after ``dvc.yaml``'s ``outs``), not ``artifacts``,
because "artifacts" already means MLflow's run artifacts throughout this project.
"""
