"""Every 422 in the field's own terms (issue 59, finding 9): ``max_runtime_s: Input should be
less than or equal to 31622400`` and ``nominal: Input should be greater than or equal to 0``
read like a validator. A sweep over every request body the API takes, with values out of
range, of the wrong type, too long or in the wrong form: no pydantic wording is left."""

import importlib
import pkgutil

import pytest
from pydantic import BaseModel, ValidationError

import gpupool.server.routes
from gpupool.plain_errors import VALIDATOR_WORDS
from gpupool.server.errors import validation_body
from gpupool.server.schemas import JobIn, QuotaIn, TenantIn, UserIn

BAD = (-3, 0, 10**15, 1.5, "abc", "", "x" * 70000, "研发 部", None, True, [], {}, [1] * 5000,
       "2026-13-45T99:00", {"k": "v"})  # fmt: skip


def _detail(model: type[BaseModel], body: dict) -> dict:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    return validation_body(caught.value.errors())


def test_the_issue_s_examples_read_in_their_own_terms():
    body = _detail(JobIn, {"request": "gpu=1", "max_runtime_s": 10**9})
    assert body["detail"] == "max_runtime_s: at most 366 days (31622400 s)"
    assert body["field"] == "max_runtime_s"
    assert _detail(QuotaIn, {"resource": "gpu", "nominal": -3})["detail"] == (
        "nominal: cannot be negative"
    )
    assert _detail(TenantIn, {"name": "a" * 101})["detail"] == (
        "name: at most 100 characters (101 given)"
    )
    assert _detail(UserIn, {"name": "ann", "role": "boss"})["detail"] == (
        "role: 'boss' is not one of admin, tenant-admin, member, viewer, finance, agent or metrics"
    )
    assert _detail(TenantIn, {"name": "a", "colour": "red"})["detail"] == (
        "colour: not a field this request takes"
    )


def _request_models() -> list[type[BaseModel]]:
    modules = [importlib.import_module("gpupool.server.schemas"),
               importlib.import_module("gpupool.server.services.schemas")]  # fmt: skip
    for info in pkgutil.iter_modules(gpupool.server.routes.__path__):
        modules.append(importlib.import_module(f"gpupool.server.routes.{info.name}"))
    found = {
        obj
        for m in modules
        for obj in vars(m).values()
        if isinstance(obj, type)
        and issubclass(obj, BaseModel)
        and obj.model_config.get("extra") == "forbid"  # what the API takes (Strict)
    }
    return sorted(found, key=lambda m: (m.__module__, m.__name__))


def test_no_request_body_answers_in_the_validators_words():
    models = _request_models()
    assert len(models) > 30  # every body the API takes
    said = []
    for model in models:
        for field in model.model_fields:
            for bad in BAD:
                try:
                    model.model_validate({field: bad})
                except ValidationError as exc:
                    body = validation_body(exc.errors())
                    said += [body["detail"], *(e["message"] for e in body["errors"])]
    assert len(said) > 1000
    leaks = sorted({s for s in said if any(w in s for w in VALIDATOR_WORDS)})
    assert leaks == [], leaks[:20]
