from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "src" / "cudastack" / "data" / "report.schema.json"


@pytest.fixture(autouse=True, scope="session")
def _private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """cudastack's state (transactions, the import-verdict cache) goes to a temp dir, never $HOME."""
    os.environ.setdefault("CUDASTACK_STATE_DIR", str(tmp_path_factory.mktemp("cudastack-state")))


@pytest.fixture(scope="session")
def report_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@pytest.fixture
def validate_report(report_schema: dict[str, Any]) -> Any:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is a test dependency ([test] extra)")

    def check(data: dict[str, Any]) -> None:
        jsonschema.validate(data, report_schema, cls=jsonschema.Draft202012Validator)

    return check
