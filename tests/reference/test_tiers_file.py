"""``serve --tiers FILE``: a tiers file replaces the shipped ``tiers.toml``; a bad one is
refused naming the field, exit 2, before anything listens."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from running_reference import ReferenceFactory, bearer

from reference.__main__ import main


def _shipped() -> dict[str, Any]:
    text = (resources.files("reference") / "tiers.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(tomli_w.dumps(document), encoding="utf-8")
    return path


def test_a_tiers_file_replaces_the_shipped_tiers(
    reference_factory: ReferenceFactory, tmp_path: Path
) -> None:
    document = _shipped()
    document["tiers"]["low-limit"].update(requests_per_minute=12, max_credits_per_day=40)
    service = reference_factory(args=["--tiers", str(_write(tmp_path / "low.toml", document))])
    client = service.client()
    low = client.get("/v1/account/tier", headers=bearer(service.key("low-limit"))).json()
    assert (low["requests_per_minute"], low["max_credits_per_day"]) == (12, 40)
    studio = client.get("/v1/account/tier", headers=bearer(service.key("primary"))).json()
    assert studio["requests_per_minute"] == document["tiers"]["studio"]["requests_per_minute"]


def _bad_rate(document: dict[str, Any]) -> None:
    document["tiers"]["low-limit"]["requests_per_minute"] = "twelve"


def _typo(document: dict[str, Any]) -> None:
    document["tiers"]["low-limit"]["request_per_minute"] = 12


def _no_low_daily(document: dict[str, Any]) -> None:
    del document["tiers"]["low-daily"]


def _no_prices(document: dict[str, Any]) -> None:
    del document["prices"]["image"]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (_bad_rate, "tiers.low-limit.requests_per_minute must be a non-negative integer"),
        (_typo, "tiers.low-limit.request_per_minute is not a tier field"),
        (_no_low_daily, "tiers.low-daily is missing (a provisioned account uses it)"),
        (_no_prices, "prices.image must be a non-negative integer"),
    ],
    ids=["bad-value", "unknown-field", "missing-tier", "missing-price"],
)
def test_a_bad_tiers_file_is_refused_naming_the_field(
    change: Any, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _shipped()
    change(document)
    path = _write(tmp_path / "tiers.toml", document)
    assert _serve(tmp_path, path) == 2
    captured = capsys.readouterr()
    assert f"error: --tiers {path}: {says}" in captured.err
    assert "listening on" not in captured.out


def test_a_tiers_file_that_is_not_toml_or_not_there_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[tiers.low-limit\n", encoding="utf-8")
    assert _serve(tmp_path, broken) == 2
    assert f"error: --tiers {broken} is not TOML" in capsys.readouterr().err
    assert _serve(tmp_path, tmp_path / "absent.toml") == 2
    assert f"cannot read {tmp_path / 'absent.toml'}" in capsys.readouterr().err


def _serve(tmp_path: Path, tiers: Path) -> int:
    """``serve --tiers`` in this process: a bad file returns before any socket or store."""
    return main(["serve", "--port", "0", "--db", str(tmp_path / "db"), "--tiers", str(tiers)])
