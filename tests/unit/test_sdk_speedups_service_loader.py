"""The lean data loader: botocore's models, unchanged, without listing every service first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import UnknownServiceError
from botocore.loaders import Loader

from kaibo_core.adapters.sdk_speedups.service_loader import (
    PlainJSONFileLoader,
    ServiceLoader,
    install_service_loader,
)

SERVICES = ("dynamodb", "sqs", "bedrock-runtime")  # every client Kaibo creates
TYPES = ("service-2", "endpoint-rule-set-1")  # the models a client loads


def _no_listing(*_: Any) -> list[str]:
    raise AssertionError("listed every service")


@pytest.mark.parametrize("service", SERVICES)
@pytest.mark.parametrize("type_name", TYPES)
def test_models_are_botocores(service: str, type_name: str) -> None:
    assert ServiceLoader().load_service_model(service, type_name) == Loader().load_service_model(
        service, type_name
    )


def test_a_known_service_is_loaded_without_listing_them_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ServiceLoader, "list_available_services", _no_listing)
    session = botocore.session.get_session()
    install_service_loader(session)
    client = session.create_client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"
    )
    assert client.meta.service_model.service_name == "dynamodb"
    assert ServiceLoader().load_service_model("sqs", "service-2", "2012-11-05")["metadata"]["protocol"]


def test_an_unknown_service_raises_botocores_error() -> None:
    with pytest.raises(UnknownServiceError) as raised:
        ServiceLoader().load_service_model("no-such-service", "service-2")
    assert "dynamodb" in str(raised.value)  # botocore's message lists the known services
    with pytest.raises(UnknownServiceError):
        ServiceLoader().load_service_model("no-such-service", "service-2", "2012-08-10")


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_aws_data_path_and_extras_are_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Models under AWS_DATA_PATH come first, and "-extras" files merge into them, as botocore does."""
    model = Loader().load_service_model("sqs", "service-2")
    newer = tmp_path / "sqs" / "2099-01-01"
    _write(newer / "service-2.json", {**model, "metadata": {**model["metadata"], "apiVersion": "2099-01-01"}})
    extras = {"version": 1.0, "merge": {"metadata": {"kaiboExtra": "yes"}}}
    _write(newer / "service-2.sdk-extras.json", extras)
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))

    session = botocore.session.get_session()
    expected = session.get_component("data_loader").load_service_model("sqs", "service-2")
    install_service_loader(session)
    loaded = session.get_component("data_loader").load_service_model("sqs", "service-2")

    assert isinstance(session.get_component("data_loader"), ServiceLoader)
    assert loaded == expected
    assert loaded["metadata"]["apiVersion"] == "2099-01-01"
    assert loaded["metadata"]["kaiboExtra"] == "yes"


@pytest.mark.parametrize(
    "name", ["endpoints", "sdk-default-configuration", "dynamodb/2012-08-10/service-2", "_retry"]
)
def test_plain_dicts_hold_botocores_data_in_botocores_order(name: str) -> None:
    """Plain and gzipped files alike: equal, and in the same order everywhere (json.dumps keeps it)."""
    plain = Loader(file_loader=PlainJSONFileLoader()).load_data(name)
    botocores = Loader().load_data(name)
    assert json.dumps(plain) == json.dumps(botocores)
    assert type(plain) is dict


def test_a_missing_file_is_none_as_for_botocore(tmp_path: Path) -> None:
    assert PlainJSONFileLoader().load_file(str(tmp_path / "nothing")) is None
