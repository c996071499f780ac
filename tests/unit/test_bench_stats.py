"""Trial-level statistics and ``bench compare``'s verdict and exit code, on synthetic runs."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from cudastack.bench import BENCH_FORMAT
from cudastack.bench.client import RequestRecord
from cudastack.bench.spec import vllm_counter_delta
from cudastack.bench.stats import bootstrap_ratio_ci, percentile, permutation_p, permutation_ratio_ci, ratio_ci
from cudastack.cli import main


def test_percentile_is_numpys_linear_interpolation() -> None:
    xs = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    assert percentile(xs, 50) == statistics.median(xs)
    q = statistics.quantiles(xs, n=10, method="inclusive")
    assert percentile(xs, 10) == pytest.approx(q[0]) and percentile(xs, 90) == pytest.approx(q[8])
    assert percentile([], 50) is None


def test_three_trials_a_side_can_never_decide() -> None:
    a, b = [100.0, 101.0, 102.0], [50.0, 51.0, 52.0]  # B half as fast, yet C(6,3)=20 splits: p ≥ 0.1
    assert permutation_p(a, b) >= 0.1
    assert permutation_ratio_ci(a, b) is None


def test_permutation_interval_brackets_a_clear_ratio() -> None:
    a = [100.0, 103.0, 98.0, 101.0, 99.0]
    b = [x * 0.8 for x in (101.0, 97.0, 100.0, 102.0, 99.5)]
    ci, method = ratio_ci(a, b)
    assert method.startswith("permutation") and ci is not None
    assert ci[1] < 1.0 and ci[0] <= 0.8 * 100 / 100 <= ci[1]


def test_bootstrap_from_eight_trials() -> None:
    a = [100.0 + i for i in range(8)]
    same = [100.5 + i for i in range(8)]
    ci, method = ratio_ci(a, same)
    assert method.startswith("bootstrap") and ci is not None and ci[0] < 1.0 < ci[1]
    faster = bootstrap_ratio_ci(a, [x * 1.2 for x in a])
    assert faster is not None and faster[0] > 1.0


def test_counter_delta_and_missing_counters() -> None:
    before = (
        'vllm:spec_decode_num_drafts_total{engine="0"} 10.0\nvllm:spec_decode_num_draft_tokens_total 40\n'
        "vllm:spec_decode_num_accepted_tokens_total 15\n"
    )
    after = before.replace("10.0", "20.0").replace(" 40", " 80").replace(" 15", " 35")
    d = vllm_counter_delta(before, after)
    assert d is not None and (d["drafts"], d["draft_tokens"], d["accepted_tokens"]) == (10, 40, 20)
    assert vllm_counter_delta("vllm:num_requests_running 1\n", "vllm:num_requests_running 2\n") is None


def _snapshot(torch: str) -> dict[str, Any]:
    dist = {"key": "torch", "name": "torch", "version": torch, "native": {"digest": torch}, "source": {"kind": "wheel"}}
    return {"format": 1, "distributions": [dist]}


def _run_file(path: Path, tpots: list[float], *, torch: str, tokens: int = 20) -> str:
    """A run whose trial t has 4 requests with TPOT tpots[t] (and so output tok/s in proportion)."""
    requests, trials = [], []
    for t, tpot in enumerate(tpots):
        for i in range(4):
            times = tuple(0.05 + k * tpot for k in range(tokens))
            requests.append(
                RequestRecord(
                    trial=t,
                    index=i,
                    requested_output=tokens,
                    start=0.0,
                    chunk_times=times,
                    chunk_tokens=(1,) * tokens,
                    end=times[-1],
                    completion_tokens=tokens,
                    token_source="server-per-chunk",
                ).as_dict()
            )
        trials.append({"trial": t, "load": "concurrency=4", "metrics": {"duration": 0.05 + (tokens - 1) * tpot}})
    bench = {
        "format": BENCH_FORMAT,
        "trials": trials,
        "requests": requests,
        "workload": {"hash": "w"},
        "spec": {"source": "unavailable", "warnings": []},
        "server_snapshot": _snapshot(torch),
        "stopped": None,
    }
    path.write_text(json.dumps({"schema_version": "1.2", "command": "bench run", "bench": bench}))
    return str(path)


def test_compare_exits_1_only_when_b_is_really_worse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], validate_report: Any
) -> None:
    base = [0.010 + 0.00002 * (i % 3) for i in range(8)]  # 0.4 % noise
    a = _run_file(tmp_path / "a.json", base, torch="2.13.0+cu128")
    slower = _run_file(tmp_path / "b.json", [x * 1.15 for x in base], torch="2.13.0+cu130")
    assert main(["bench", "compare", a, slower]) == 1
    out = capsys.readouterr().out
    assert "B worse" in out and "bootstrap" in out
    assert "torch 2.13.0+cu128 → 2.13.0+cu130" in out
    faster = _run_file(tmp_path / "c.json", [x * 0.85 for x in base], torch="2.13.0+cu128")
    assert main(["bench", "compare", a, faster]) == 0
    assert "B better" in capsys.readouterr().out
    # 1 % slower, consistently: the interval excludes 1, but the effect is under --min-effect 3 %
    tiny = _run_file(tmp_path / "d.json", [x * 1.01 for x in base], torch="2.13.0+cu128")
    assert main(["bench", "compare", a, tiny, "--min-effect", "3%", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    validate_report(data)  # the shared envelope (report.schema.json), as every command's JSON
    rows = data["compare"]["rows"]
    tpot = next(r for r in rows if r["metric"] == "median_tpot")
    assert tpot["ci"][0] > 1.0 and tpot["verdict"] == "no real difference"
    assert main(["bench", "compare", a, tiny, "--min-effect", "0.5%"]) == 1


def test_compare_refuses_a_file_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"command": "doctor"}')
    assert main(["bench", "compare", str(bad), str(bad)]) == 2
    assert "not a cudastack bench run" in capsys.readouterr().err


def test_plot_writes_one_cdf_per_metric_for_both_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import re
    import xml.etree.ElementTree as ET

    a = _run_file(tmp_path / "a.json", [0.010] * 3, torch="2.13.0")
    b = _run_file(tmp_path / "b.json", [0.020] * 3, torch="2.13.0")
    out = tmp_path / "p.html"
    assert main(["bench", "plot", a, b, "-o", str(out)]) == 0
    svgs = re.findall(r"<svg.*?</svg>", out.read_text(), re.S)
    assert len(svgs) == 4
    for svg in svgs:
        lines = ET.fromstring(svg).findall("{http://www.w3.org/2000/svg}polyline")
        assert len(lines) == 2  # A and B
    itl_b = ET.fromstring(svgs[2]).findall("{http://www.w3.org/2000/svg}polyline")[1]
    assert len(itl_b.get("points", "").split()) == 3 * 4 * 19  # one point per token after the first


def test_gpu_state_from_nvidia_smi_falls_back_to_the_old_reason_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cudastack.bench.gpu import is_local, read_gpu_state

    # An nvidia-smi of a driver before 535: it rejects clocks_event_reasons, knows clocks_throttle_reasons.
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'case "$1" in *clocks_event_reasons*) echo "Field \\"clocks_event_reasons.active\\" is not a valid field" >&2;'
        " exit 2;; esac\n"
        "echo '0, 1980, 2619, 350.12, 61, 0x0000000000000004'\n"
        "echo '1, 1410, 2619, [N/A], 55, 0x0000000000000060'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("CUDASTACK_NVIDIA_SMI", str(smi))
    state = read_gpu_state()
    # NVML first: pynvml (the test extra) is there, its library is not (no driver here), so it says
    # why, and nvidia-smi gives the same record.
    assert state["source"] == "nvidia-smi"
    assert "NVMLError_LibraryNotFound" in state["nvml_unavailable"]
    assert state["gpus"][0] == {
        "index": 0,
        "sm_clock_mhz": 1980.0,
        "mem_clock_mhz": 2619.0,
        "power_w": 350.12,
        "temperature_c": 61.0,
        "clock_event_reasons": ["sw_power_cap"],
    }
    assert state["gpus"][1]["power_w"] is None
    assert state["gpus"][1]["clock_event_reasons"] == ["sw_thermal_slowdown", "hw_thermal_slowdown"]
    monkeypatch.setenv("CUDASTACK_NVIDIA_SMI", str(tmp_path / "absent"))
    why = read_gpu_state()["unavailable"]
    assert "NVML Shared Library Not Found" in why and "absent" in why  # both sources' reasons
    assert is_local("http://127.0.0.1:8000") and is_local("http://localhost:1") and is_local("http://[::1]:80")
    assert not is_local("http://10.0.0.5:8000")


def test_httpx_is_imported_only_by_a_bench_run() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from cudastack.cli import build_parser, main; build_parser(); "
        "assert 'httpx' not in sys.modules, 'httpx imported at start-up'; "
        "sys.modules['httpx'] = None; "  # as if the bench extra were not installed
        "raise SystemExit(main(['bench', 'run', '--url', 'http://127.0.0.1:9', '--warmup', '0']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 3, proc.stderr
    assert "cudastack bench needs httpx" in proc.stderr and "cudastack[bench]" in proc.stderr
