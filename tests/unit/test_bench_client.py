"""The streaming client and ``bench run`` against the scripted fixture server (tests/benchserver.py).

The server is a real process on 127.0.0.1 speaking HTTP/1.1 + SSE; it is started and stopped by
pid. No speed is asserted: only counts, structure and the relations between recorded times.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cudastack.bench.client import RequestRecord, make_client, split_events, stream_request
from cudastack.bench.metrics import itls, ttft
from cudastack.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port_file = tmp_path_factory.mktemp("benchserver") / "port"
    proc = subprocess.Popen([sys.executable, "-m", "tests.benchserver", str(port_file)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"fixture server did not start (exit {proc.poll()})")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def request(url: str, prompt: str, max_tokens: int = 4, chat: bool = False) -> RequestRecord:
    async def go() -> RequestRecord:
        async with make_client(timeout=30, connections=1) as client:
            path = "/v1/chat/completions" if chat else "/v1/completions"
            body: dict[str, Any] = {"model": "fixture", "max_tokens": max_tokens, "stream": True}
            body.update({"messages": [{"role": "user", "content": prompt}]} if chat else {"prompt": prompt})
            return await stream_request(client, url + path, body, trial=0, index=0, trial_t0=time.perf_counter())

    return asyncio.run(go())


def test_several_events_in_one_read_are_one_chunk_with_their_tokens(server: str) -> None:
    r = request(server, "coalesced")
    assert r.ok, r.error
    assert r.events == 6  # 4 text events, the usage-only event, [DONE]
    assert r.chunk_tokens == (3, 1)
    assert r.completion_tokens == 4 and r.token_source == "server-per-chunk"


def test_a_final_chunk_with_only_usage_gives_the_servers_count(server: str) -> None:
    r = request(server, "final-usage", max_tokens=5)
    assert r.ok, r.error
    assert r.token_source == "server-final"
    assert r.completion_tokens == 5 and r.prompt_tokens == 5
    assert sum(r.chunk_tokens) == 5  # one text event counted as one token: agrees here


def test_transformers_serve_final_chunk_carries_usage_and_no_done(server: str) -> None:
    # transformers serve (5.17) puts the usage on the last chunk beside finish_reason and closes the
    # stream without [DONE]: finished, and its count is not added to the last read.
    r = request(server, "hf-serve", max_tokens=5)
    assert r.ok, r.error
    assert r.finish_reason == "length" and r.completion_tokens == 5
    assert r.token_source == "server-final"
    assert sum(r.chunk_tokens) == 5 and max(r.chunk_tokens) == 1


def test_transformers_backend_sends_only_openai_fields(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Model "strict" answers 422 to fields outside OpenAI's schema, as transformers serve does.
    args = ["--url", server, "--model", "strict", "--dataset", "random:in=4,out=3", "--num-prompts", "2"]
    args += ["--trials", "1", "--warmup", "0", "--ignore-eos", "--temperature", "0"]
    code, data, _ = _run([*args, "--backend", "transformers"], tmp_path, capsys)
    assert code == 0
    reqs = data["bench"]["requests"]
    assert [r["error"] for r in reqs] == [None, None]
    assert [r["completion_tokens"] for r in reqs] == [3, 3]
    code, data, _ = _run([*args, "--backend", "vllm"], tmp_path, capsys)
    assert code == 1
    assert "422" in data["bench"]["requests"][0]["error"]


def test_utf8_split_across_reads_is_decoded_whole(server: str) -> None:
    for chat in (False, True):
        r = request(server, "utf8", chat=chat)
        assert r.ok, r.error
        assert r.text_chars == len("héllo 世界!")
        assert r.chunk_tokens == (1, 1)


def test_error_mid_stream_keeps_what_arrived(server: str) -> None:
    r = request(server, "error")
    assert not r.ok
    assert r.error is not None and "EngineCore encountered an issue" in r.error
    assert r.chunk_tokens == (1, 1)


def test_connection_closed_without_done_is_an_error(server: str) -> None:
    r = request(server, "drop")
    assert r.error is not None and "without [DONE]" in r.error
    assert sum(r.chunk_tokens) == 2


def test_http_error_status_is_recorded(server: str) -> None:
    r = request(server, "http500")
    assert r.error is not None and r.error.startswith("HTTP 500")


def test_multi_token_chunks_give_one_itl_per_token(server: str) -> None:
    r = request(server, "multi", max_tokens=7)
    assert r.ok, r.error
    assert r.chunk_tokens == (1, 3, 3)
    gaps = itls(r)
    assert len(gaps) == 6  # one per token after the first, not one per chunk (2)
    assert gaps[0] == gaps[1] == gaps[2] and gaps[3] == gaps[4] == gaps[5]
    first = ttft(r)
    assert first is not None
    assert sum(gaps) == pytest.approx(r.chunk_times[-1] - first)


def test_split_events_keeps_an_incomplete_tail() -> None:
    events, rest = split_events(b'data: {"a": 1}\r\n\r\n: comment\n\ndata: [DO')
    assert events == [b'{"a": 1}'] and rest == b"data: [DO"


def _run(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / "run.json"
    code = main(["bench", "run", *args, "-o", str(out), "--format", "json"])
    captured = capsys.readouterr()
    data = json.loads(out.read_text()) if out.exists() else {}
    return code, data, captured.err


def test_run_counts_spec_counters_over_the_measured_trials_only(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], report_schema: dict[str, Any]
) -> None:
    code, data, err = _run(
        [
            "--url",
            server,
            "--dataset",
            "random:in=8,out=4",
            "--num-prompts",
            "3",
            "--trials",
            "2",
            "--warmup",
            "2",
            "--concurrency",
            "1,2",
        ],
        tmp_path,
        capsys,
    )
    assert code == 0, err
    assert set(report_schema["required"]) <= set(data)  # the shared envelope (its target is the doctor's)
    bench = data["bench"]
    assert data["command"] == "bench run" and data["schema_version"]
    assert len(bench["trials"]) == 4 and len(bench["requests"]) == 12 and len(bench["warmup_requests"]) == 2
    spec = bench["spec"]
    assert spec["source"] == "vllm-metrics"
    assert spec["counters"]["drafts"] == 2 * 12  # the 2 warm-up requests moved the counters too: not counted
    assert spec["acceptance_length"] == pytest.approx(1 + 3 / 2)
    assert spec["acceptance_per_position"] == [1.0, 0.5]
    assert bench["tokens"]["not_requested_length"] == 0
    assert all(r["completion_tokens"] == 4 for r in bench["requests"])


def test_trials_get_fresh_prompts_and_the_hash_follows_the_seed() -> None:
    from cudastack.bench.dataset import load_workload, prompts_for, workload_hash

    w = load_workload("random:in=16,out=4", num_prompts=4, trials=2, warmup=1)
    t0 = prompts_for(w, trial=0, count=4, seed=1, warmup=1)
    t1 = prompts_for(w, trial=1, count=4, seed=1, warmup=1)
    assert not {p.text for p in t0} & {p.text for p in t1}
    assert t0 == prompts_for(w, trial=0, count=4, seed=1, warmup=1)
    assert workload_hash(w, {"seed": 1}) != workload_hash(w, {"seed": 2})


def test_server_down_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    code, data, err = _run(["--url", f"http://127.0.0.1:{port}", "--num-prompts", "1"], tmp_path, capsys)
    assert code == 3
    assert "cannot reach the server" in err and "hint:" in err
    assert data == {}


def test_mid_run_errors_are_saved_with_every_finished_request(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = tmp_path / "d.jsonl"
    ds.write_text("\n".join(json.dumps({"prompt": p, "max_tokens": 3}) for p in ("ok", "error", "ok", "drop")) + "\n")
    code, data, err = _run(
        [
            "--url",
            server,
            "--dataset",
            f"jsonl:{ds}",
            "--num-prompts",
            "4",
            "--trials",
            "1",
            "--warmup",
            "0",
            "--seed",
            "3",
        ],
        tmp_path,
        capsys,
    )
    assert code == 1, err
    reqs = data["bench"]["requests"]
    assert len(reqs) == 4
    assert sorted(r["error"] is None for r in reqs) == [False, False, True, True]
    assert data["bench"]["failed_requests"] == 2


def served(url: str) -> int:
    """Requests the fixture server has finished (its drafts counter moves by 2 per request)."""
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    line = next(x for x in text.splitlines() if x.startswith("vllm:spec_decode_num_drafts_total"))
    return int(float(line.rsplit(" ", 1)[1])) // 2


def test_ctrl_c_keeps_every_finished_request(server: str, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cudastack",
            "bench",
            "run",
            "--url",
            server,
            "--dataset",
            "random:in=4,out=10",
            "--num-prompts",
            "40",
            "--trials",
            "1",
            "--warmup",
            "0",
            "-o",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # ^C at a terminal: SIGINT at its default. A test run started in the background (`nohup
        # .ci/run &`) passes SIG_IGN down through exec, and Python then never raises KeyboardInterrupt
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    start = served(server)
    deadline = time.monotonic() + 60
    while served(server) < start + 2 and time.monotonic() < deadline:  # ~0.3 s a request: 2 done, most not
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    reqs = json.loads(out.read_text())["bench"]["requests"]
    assert 0 < len(reqs) < 40
    assert all(r["error"] is None and r["completion_tokens"] == 10 for r in reqs)


def test_run_with_a_baseline_exits_1_when_slower(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.test_bench_stats import _run_file

    # The fixture sleeps 30 ms before every write, so its TPOT is at least 30 ms: a baseline at 1 ms
    # is certainly faster. A bound set by construction, not a measured speed.
    fast = _run_file(tmp_path / "fast.json", [0.001] * 8, torch="2.13.0")
    args = [
        "--url",
        server,
        "--dataset",
        "random:in=4,out=4",
        "--num-prompts",
        "4",
        "--concurrency",
        "4",
        "--trials",
        "4",
        "--warmup",
        "0",
        "--baseline",
        fast,
    ]
    code, _, err = _run(args, tmp_path, capsys)
    assert code == 1, err
    assert "B is worse than A" in err and "permutation" in err


def test_a_bad_baseline_fails_before_any_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"bench": {"format": 1, "trials": [{"trial": 0}]}}')
    code, data, err = _run(["--url", "http://127.0.0.1:9", "--baseline", str(bad)], tmp_path, capsys)
    assert code == 2 and "bench.trials[0] needs trial, load and metrics.duration" in err
    assert data == {}


def test_sglang_per_response_spec_details_are_preferred(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = tmp_path / "d.jsonl"
    ds.write_text(json.dumps({"prompt": "sglang", "max_tokens": 4}) + "\n")
    code, data, err = _run(
        [
            "--url",
            server,
            "--backend",
            "sglang",
            "--dataset",
            f"jsonl:{ds}",
            "--num-prompts",
            "3",
            "--trials",
            "1",
            "--warmup",
            "0",
            "--temperature",
            "0.7",
        ],
        tmp_path,
        capsys,
    )
    assert code == 0, err
    spec = data["bench"]["spec"]
    assert spec["source"] == "sglang-response"
    assert spec["acceptance_length"] == 4 / 2  # completion tokens / verify steps, per request
    assert any("temperature 0.7" in w for w in spec["warnings"])
    assert data["bench"]["server"]["backend"] == "sglang"


def test_two_servers_run_interleaved_and_are_compared(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    code = main(
        [
            "bench",
            "run",
            "--url",
            server,
            "--url-b",
            server.replace("127.0.0.1", "localhost"),
            "--dataset",
            "random:in=4,out=3",
            "--num-prompts",
            "2",
            "--trials",
            "4",
            "--warmup",
            "1",
            "-o",
            str(a),
            "--output-b",
            str(b),
            "--min-effect",
            "99%",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    ta = [t["started"] for t in json.loads(a.read_text())["bench"]["trials"]]
    tb = [t["started"] for t in json.loads(b.read_text())["bench"]["trials"]]
    assert ta[0] < tb[0] < tb[1] < ta[1] < ta[2] < tb[2] < tb[3] < ta[3]  # rounds A B, B A, A B, B A
    assert "B is not worse than A" in out


def test_rate_mode_sends_on_the_arrival_schedule(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data, err = _run(
        [
            "--url",
            server,
            "--dataset",
            "random:in=4,out=2",
            "--num-prompts",
            "5",
            "--rate",
            "20",
            "--arrival",
            "constant",
            "--trials",
            "1",
            "--warmup",
            "0",
        ],
        tmp_path,
        capsys,
    )
    assert code == 0, err
    bench = data["bench"]
    assert [t["load"] for t in bench["trials"]] == ["rate=20/s constant"]
    starts = sorted((r["index"], r["start"]) for r in bench["requests"])
    # constant arrivals every 50 ms: request i is sent no earlier than i * 0.05 s (a schedule, not a speed)
    assert all(start >= i * 0.05 - 1e-3 for i, start in starts)


def test_compare_of_runs_with_no_common_load_is_a_usage_error(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = []
    for conc in ("1", "2"):
        out = tmp_path / f"c{conc}.json"
        assert (
            main(
                [
                    "bench",
                    "run",
                    "--url",
                    server,
                    "--dataset",
                    "random:in=4,out=2",
                    "--num-prompts",
                    "1",
                    "--concurrency",
                    conc,
                    "--trials",
                    "1",
                    "--warmup",
                    "0",
                    "-o",
                    str(out),
                ]
            )
            == 0
        )
        files.append(str(out))
    capsys.readouterr()
    assert main(["bench", "compare", *files]) == 2
    assert "share no load" in capsys.readouterr().err


def test_multi_token_chunks_without_spec_counters_are_flagged(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = tmp_path / "d.jsonl"
    ds.write_text(json.dumps({"prompt": "coalesced", "max_tokens": 4}) + "\n")
    code, data, err = _run(
        ["--url", server, "--dataset", f"jsonl:{ds}", "--num-prompts", "2", "--trials", "1", "--warmup", "0"],
        tmp_path,
        capsys,
    )
    assert code == 0, err
    spec = data["bench"]["spec"]
    assert spec["source"] == "vllm-metrics"  # the fixture's counters moved: explained, no warning
    assert not any("fell behind" in w for w in spec["warnings"])
    from cudastack.bench.spec import spec_summary

    alone = spec_summary(
        vllm_deltas=[],
        response_details=[],
        completion_tokens=[],
        server_info=(None, None),
        tokens_per_chunk_mean=data["bench"]["summary"]["tokens_per_chunk"]["mean"],
        temperature=0,
    )
    assert alone["source"] == "unavailable"
    assert any("2.00 tokens on average" in w and "fell behind" in w for w in alone["warnings"])


def test_goodput_counts_requests_within_the_slo(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fixture's TPOT is at least 30 ms by construction (it sleeps before every write).
    runs = {}
    for slo in ("tpot=1ms", "tpot=60s,ttft=60s"):
        code, data, err = _run(
            [
                "--url",
                server,
                "--dataset",
                "random:in=4,out=3",
                "--num-prompts",
                "2",
                "--trials",
                "1",
                "--warmup",
                "0",
                "--slo",
                slo,
            ],
            tmp_path,
            capsys,
        )
        assert code == 0, err
        runs[slo] = data["bench"]["trials"][0]["metrics"]
    assert runs["tpot=1ms"]["goodput"] == 0
    loose = runs["tpot=60s,ttft=60s"]
    assert loose["goodput"] == pytest.approx(loose["request_rate"]) and loose["goodput"] > 0


def test_draft_counters_that_did_not_move_are_a_warning() -> None:
    from cudastack.bench.spec import spec_summary

    still = {"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0, "accepted_per_position": [0.0, 0.0]}
    out = spec_summary(
        vllm_deltas=[still],
        response_details=[],
        completion_tokens=[],
        server_info=(None, None),
        tokens_per_chunk_mean=1.0,
        temperature=0.0,
    )
    assert out["source"] == "vllm-metrics" and "acceptance_length" not in out
    assert any("did not move" in w for w in out["warnings"])
