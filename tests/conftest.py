from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests import oracles, users

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "src" / "cudastack" / "data" / "report.schema.json"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "oracle(tool): needs the executable on PATH; skips without it, fails under CUDASTACK_REQUIRE_ORACLES=1",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("oracle"):
        for tool in mark.args:
            oracles.need_tool(tool)


@pytest.fixture(autouse=True, scope="session")
def _private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """cudastack's state (transactions, the import-verdict cache) goes to a temp dir, never $HOME."""
    os.environ.setdefault("CUDASTACK_STATE_DIR", str(tmp_path_factory.mktemp("cudastack-state")))


@pytest.fixture(scope="session")
def unprivileged_user() -> users.User:
    """A user root's privileges do not cover (created with useradd when the tests run as root)."""
    return users.unprivileged_user()


@pytest.fixture(scope="session")
def report_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@pytest.fixture
def validate_report(report_schema: dict[str, Any]) -> Any:
    try:
        import jsonschema
    except ImportError:
        oracles.missing("jsonschema is a test dependency ([test] extra)")

    def check(data: dict[str, Any]) -> None:
        jsonschema.validate(data, report_schema, cls=jsonschema.Draft202012Validator)

    return check
