"""Dataset loaders: read the raw benchmark files, validate them, normalise them.

One module per dataset (``gbem_ua``, ``occugender``, ``rubia``, ``crows_pairs``, ``winobias``,
``winogender``, ``genderlex``, ``gender_pairs``). Each loader reads from the local mirror
(``params.data.mirror_dir``, env ``BIASLAB_DATA_DIR`` wins) or, when a file is missing and
``allow_download`` is set, from the pinned public source (:mod:`biaslab.data.sources`). Every data
defect is dropped, fixed or noted in a :class:`~biaslab.data.report.PrepareReport` – never silently.
:func:`biaslab.data.prepare.prepare` writes all tables of ``docs/prepared_schema.md``.

Nothing heavy is imported here: ``datasets``/``pandas`` are imported inside the loaders.
"""

from biaslab.data.errors import DataError

__all__ = ["DataError"]
