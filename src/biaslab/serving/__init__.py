"""Registered versions as MLflow ``python_function`` models: load, generate and score any variant.

Every version the ``register`` stage creates - a full model (base, embedding-edited checkpoint), an
embedding-hook or LoRA overlay, a prompt variant - carries an ``MLmodel`` whose ``python_function``
flavour names :mod:`biaslab.serving.loader`, so one call loads any of them (the champion: with
:func:`biaslab.registry.promotions.load_champion`, which verifies it against the promoter's record first; a raw
``models:/`` load checks a package against its own manifest only)::

    model = mlflow.pyfunc.load_model("models:/biaslab-debiased/3")
    model.predict(pd.DataFrame({"context": ["The nurse said that"], "continuation": [" she"]}))
    model.predict(pd.DataFrame({"prompt": ["The doctor said that"]}), params={"max_new_tokens": 10})

One contract for every kind (:mod:`.contract`), computed by biaslab's own scorer with the settings the
variant was evaluated with (BOS, prompt format, prompt prefix), so a served number is the number the
benchmarks saw. Overlays and prompts do not copy their base: they pin the base's registered version
(name, version, content hash) and the loader resolves it at load time (:mod:`.base`).

    settings.py   how a version is loaded and scored (from params.yaml at registration)
    contract.py   the predict contract: input columns, params, output columns, signature, example
    package.py    writing the pyfunc files (MLmodel, requirements) into a version's package
    base.py       finding and checking a pinned base version at load time
    loader.py     ``_load_pyfunc``: rebuild the variant (base + adapter/hook/prefix) and its scorer
    predictor.py  ``predict``: requests -> scorer calls -> output frame
    command.py    the ``biaslab serve`` command line (``mlflow models serve``) and a curl example
"""
