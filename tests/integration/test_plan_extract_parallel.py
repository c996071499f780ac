"""The plan's extraction shared with forked helpers, and the ELF-table prewarm that follows it.

Wheels built here: an extension module with a fatbin (nvcc, host ``.so``) and a package of
standalone cubins. Extracting them in parallel must give the same trees, byte for byte, as one
after the other; the prewarm must leave in the store exactly what the doctor would read first
(tables of the fresh ``.so``, the cubins' scan), although the files are inside the racy window; and
the plan over the prewarmed store must say what a plan with every cache off says.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from cudastack.cuda.coverage import standalone_files, standalone_key
from cudastack.elf.table_cache import TableStore, store_dir
from cudastack.env.dists import read_distribution
from cudastack.parallel import spare_cpus
from cudastack.plan.fetch import Fetched, WheelCache
from cudastack.plan.resolve import Planned
from tests.integration import plan_index


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], str]:
    from tests import cuda_build

    root = tmp_path_factory.mktemp("gpu-wheels")
    plan_index.build_gpu_index(root, ["sm_90"])
    cubins = {}
    for arch in ("sm_80", "sm_90", "sm_90a", "sm_120"):
        built = cuda_build.nvcc(root / "cubins" / f"add_{arch}.cubin", [arch], kind="cubin")
        cubins[f"gcubin/kernels/add_{arch}.cubin"] = built.read_bytes()
    cub = plan_index.wheel(root / "more", "gcubin", "1.0", {"gcubin/__init__.py": b"", **cubins})
    gk = next((root / "build" / "wheels").glob("gkern-*.whl"))
    return [gk, cub], plan_index.publish(root / "both", [gk, cub])


def _fetched(whl: Path) -> Fetched:
    digest = hashlib.sha256(whl.read_bytes()).hexdigest()
    item = Planned(name=whl.name.split("-")[0], version="1.0", url=whl.as_uri(), sha256=digest)
    return Fetched(planned=item, path=whl, sha256=digest, size=whl.stat().st_size, how="read in place")


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".cudastack-extracted.json"}  # fmt: skip


def test_parallel_extraction_is_byte_identical_and_prewarms_what_the_doctor_reads(
    built: tuple[list[Path], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert spare_cpus() >= 1, "the parallel path needs a second CPU (CI has two)"
    wheels, _url = built
    fetched = [_fetched(w) for w in wheels]
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    one = WheelCache(tmp_path / "one")
    monkeypatch.setenv("CUDASTACK_PLAN_WORKERS", "1")
    alone = one.extract_all(fetched)
    assert one.helpers == 0
    monkeypatch.delenv("CUDASTACK_NO_CACHE")
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("CUDASTACK_PLAN_WORKERS", "2")
    two = WheelCache(tmp_path / "two")
    shared = two.extract_all(fetched)
    assert two.helpers == 1
    assert [(e.files, e.bytes_out, e.cached) for e in shared] == [(e.files, e.bytes_out, False) for e in alone]
    for a, b in zip(alone, shared, strict=True):
        assert _tree(a.root) == _tree(b.root) and _tree(a.root)
    # the prewarm, read back as the doctor reads: by each file's identity, although fresh
    directory = store_dir()
    assert directory is not None
    store = TableStore(directory)
    [so] = list(shared[0].root.rglob("*.so"))
    elf = store.load(str(so), os.stat(so))
    assert elf is not None and elf.needed is not None
    dist = read_distribution(str(shared[1].root), "gcubin-1.0.dist-info")
    found = standalone_files(dist)
    assert len(found) == 4
    hit, value = store.load_keyed(standalone_key(dist.key, found))
    assert hit and len(value) == 4
    # a second run finds every wheel extracted and forks nothing
    assert [e.cached for e in two.extract_all(fetched)] == [True, True] and two.helpers == 0


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = main(["plan", "--format", "json", *argv])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return json.loads(out)


def test_the_plan_over_prewarmed_tables_says_what_it_says_with_every_cache_off(
    built: tuple[list[Path], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.venvs import make_venv

    _wheels, url = built
    for key in [k for k in os.environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    python = make_venv(tmp_path / "env")
    argv = ("--python", str(python), "--gpu", "sm_90", "--gpu", "sm_120", "--driver", "580.65.06",
            "--", "--index-url", url, "gkern", "gcubin")  # fmt: skip
    reports = []
    for name, off in (("cold", "1"), ("prewarmed", "0")):
        monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / name))
        monkeypatch.setenv("CUDASTACK_NO_CACHE", off)
        report = _plan(capsys, *argv)
        [cand] = report["candidates"]
        reports.append(sorted(json.dumps(f, sort_keys=True) for f in cand["findings_added"]))
    assert reports[0] == reports[1]
    assert any('"CUDA001"' in f and "sm_120" in f for f in reports[1])  # gkern has no sm_120 kernel
