"""Mitigations: each one *fits* into a variant directory (``models/<variant>/``) and *applies* as a
request transform (:mod:`.prompt`), a weight edit or reversible forward hook (:mod:`.embedding`), or an
adapter (LoRA). Submodules import their heavy dependencies lazily.
"""
