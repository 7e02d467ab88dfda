"""The DVC stages: one module per stage of ``dvc.yaml``, run as ``python -m pipelines.<stage>``.

Each module parses the stage's command line (``--params params.yaml``, ``--variant <v>`` for a
per-variant stage, its own options) in ``main(argv=None)``, checks its inputs (:mod:`.inputs`), calls
the library and writes its outputs and ``runs/<stage>.json``. :mod:`.entry` is the error contract they
share. Nothing else in the package imports from here.
"""
