"""The promoter's package checks that need no store: the kind a variant must be, what an ``MLmodel`` may say, and
the evidence params an evaluate run binds (issue 42)."""

from __future__ import annotations

import hashlib
import json

import yaml

from biaslab.config import Params


def _params(**variants) -> Params:
    return Params.model_validate({"variants": {"base": {"method": "none", "model_dir": "models/base"}, **variants}})


def test_the_kind_comes_from_the_method_never_from_the_registrant():
    from biaslab.registry.package_check import expected_kind

    params = _params(soft={"method": "embedding", "model_dir": "m/soft", "embedding_mode": "soft"},
                     hook={"method": "embedding", "model_dir": "m/hook", "embedding_mode": "soft",
                           "embedding_apply": "hook"},
                     copy={"method": "embedding", "model_dir": "m/copy", "embedding_mode": "soft",
                           "embedding_apply": "checkpoint"},
                     lora={"method": "lora", "model_dir": "m/lora"},
                     prompt={"method": "prompt", "model_dir": "models/base", "prompt_prefix": {"en": "Be fair."}})
    kinds = {name: expected_kind(params.variant(name)) for name in params.variants}
    # an embedding edit is an overlay (the rows, the default, or the hook) unless stored as a checkpoint copy
    assert kinds == {"base": "full", "soft": "overlay", "hook": "overlay", "copy": "full", "lora": "overlay",
                     "prompt": "prompt"}


def _mlmodel(tmp_path, pyfunc: dict, biaslab: dict | None = None, **flavors) -> None:
    body = {"flavors": {"python_function": pyfunc, **({"biaslab": biaslab} if biaslab else {}), **flavors}}
    (tmp_path / "MLmodel").write_text(yaml.safe_dump(body), encoding="utf-8")


def test_an_mlmodel_naming_anything_but_biaslabs_loader_is_refused(tmp_path):
    from biaslab.registry.package_check import Expected, mlmodel_problems
    from biaslab.serving.settings import ServingSettings

    own = {"loader_module": "biaslab.serving.loader", "code": None, "env": {"conda": "conda.yaml"}}
    _mlmodel(tmp_path, own)
    assert mlmodel_problems(tmp_path) == []
    _mlmodel(tmp_path, {**own, "loader_module": "evil", "code": "code"})
    assert mlmodel_problems(tmp_path) == [
        "MLmodel: python_function loader_module 'evil', not biaslab's 'biaslab.serving.loader'",
        "MLmodel: python_function code 'code' (the package's own code or objects)"]
    for key in ("python_model", "model_code_path", "artifacts", "data"):
        _mlmodel(tmp_path, {**own, key: "x"})
        assert mlmodel_problems(tmp_path) == [f"MLmodel: python_function {key} 'x' (the package's own code or objects)"]
    _mlmodel(tmp_path, own, sklearn={"pickled_model": "model.pkl"})
    assert mlmodel_problems(tmp_path) == ["MLmodel: flavours ['sklearn'] besides biaslab's"]
    (tmp_path / "MLmodel").unlink()
    assert mlmodel_problems(tmp_path) == ["MLmodel: no python_function flavour (not a biaslab package)"]
    # with what params.yaml expects: the biaslab flavour's settings and prefix are compared too
    expected = Expected("soft", "embedding", "full", {}, ServingSettings())
    flavour = {"variant": "soft", "method": "embedding", "kind": "full", "prompt_prefix": {},
               "settings": ServingSettings().to_dict()}
    _mlmodel(tmp_path, own, flavour)
    assert mlmodel_problems(tmp_path, expected) == []
    _mlmodel(tmp_path, own, {**flavour, "kind": "overlay", "settings": {**flavour["settings"], "add_bos": False}})
    problems = mlmodel_problems(tmp_path, expected)
    assert problems[0] == "MLmodel: biaslab kind 'overlay', params.yaml says 'full'"
    assert problems[1].startswith("MLmodel: biaslab settings {") and len(problems) == 2


def test_binding_problems_name_every_difference_between_params_and_what_was_read():
    from biaslab.tracking import evidence as bound

    read = {"metrics.json": "a" * 64, "predictions/t.json": "b" * 64}
    params = {bound.VARIANT: "soft", bound.COUNT: "2", f"{bound.SHA}metrics.json": "a" * 64,
              f"{bound.SHA}predictions/t.json": "b" * 64}
    assert bound.binding_problems(params, read, "soft") == []
    assert bound.binding_problems({}, read, "soft") == [
        "it logged no evidence.* params (not an evaluate run that binds its evidence)"]
    assert bound.binding_problems(params, {**read, "metrics.json": "c" * 64}, "soft") == [
        f"metrics.json: sha256 {'c' * 12}… is not the {'a' * 12}… it logged"]
    assert bound.binding_problems(params, {"metrics.json": "a" * 64, "predictions/u.json": "d" * 64}, "base") == [
        "it evaluated variant 'soft', not 'base'", "predictions/t.json: bound by the run, not found",
        "predictions/u.json: read, but not bound by the run"]


def test_the_items_hash_is_the_prepared_files_digests():
    from biaslab.tracking.datasets import DatasetRef
    from biaslab.tracking.evidence import items_sha256

    refs = [DatasetRef("b", "data/b", "md5b", "eval"), DatasetRef("a", "data/a", "md5a", "eval")]
    assert items_sha256(refs) == hashlib.sha256(json.dumps([["a", "md5a"], ["b", "md5b"]]).encode()).hexdigest()
    assert items_sha256(refs) != items_sha256(refs[:1])
