"""The H200 A/B kit (issue 15): ``transformers serve`` with prompt lookup off (A) and on (B).

One command, bounded in time, that on the device (or here with ``--device cpu``):

1. builds a random-weight Llama and a locally trained tokenizer in ``--work`` (no hub access);
2. makes two model folders that share the weights and differ only in ``generation_config.json``:
   A plain, B with ``prompt_lookup_num_tokens``; both with ``min_new_tokens = max_new_tokens =
   --out`` and greedy decoding, which is transformers serve's ignore-eos (it answers 422 to an
   ``ignore_eos`` field);
3. starts one ``transformers serve`` per folder on 127.0.0.1 (each from its own folder, so both
   serve the model under the same name, ``model``, and the workload hashes agree), waits for
   ``/health`` with a bound, and checks each server's streamed ``usage`` against its non-streamed
   count for one request;
4. runs ``cudastack bench run --url A --url-b B --backend transformers`` (trials interleaved),
   ``bench compare`` (human and JSON) and ``bench plot``;
5. records the GPU state (NVML through the library, else nvidia-smi) before and after, stops both
   servers by process group, and writes at most 8 files to ``--out``.

transformers 5.17's streamer counts one token per ``put``; under prompt lookup ``generate`` puts
all of a step's accepted tokens at once (a 2-D tensor), so the streamed ``usage`` counts decode
steps, not tokens (40 tokens generated, 18 reported here on CPU). ``--usage-fix`` (on by default)
flattens what ``put`` receives in the server process: the same work, counted per token, and each
token its own SSE event, so the client's tokens per read are the accepted tokens per step.
``--no-usage-fix`` serves the stock code; the usage check in ``summary.json`` then shows the gap.

With random weights this proves the mechanics and the GPU path, not model speed.

Usage (device): ``python3 tools/h200_bench.py --out $OUT``; here:
``python tools/h200_bench.py --device cpu --dtype float32 --server-python VENV/bin/python --out DIR``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
T0 = time.monotonic()

MODEL_SCRIPT = r"""
import json, random, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
import torch
out, size = sys.argv[1], json.loads(sys.argv[2])
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
dtype = getattr(torch, size.pop("dtype"))
cfg = LlamaConfig(vocab_size=len(fast), max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
                  tie_word_embeddings=False, **size)
model = LlamaForCausalLM(cfg).to(dtype)
model.save_pretrained(out, safe_serialization=True)
# Tokens that stream no text alone (special tokens, bytes of a split UTF-8 character): suppressed, so
# that every generated token is one SSE event and the client's count can equal the server's.
silent = [i for i in range(len(fast)) if (t := fast.decode([i])) == "" or "\ufffd" in t]
print(json.dumps({"params": sum(p.numel() for p in model.parameters()), "torch": torch.__version__,
                  "cuda": torch.cuda.is_available(), "silent_tokens": silent}))
"""

SERVE_SCRIPT = r"""
import sys
if sys.argv[1] == "fix":
    import torch
    from transformers.cli.serving import utils
    stock = utils.DirectStreamer.put
    def put(self, value):
        # generate() under prompt lookup puts a step's tokens as one 2-D tensor; count them one by one
        return stock(self, value.reshape(-1) if isinstance(value, torch.Tensor) and value.dim() > 1 else value)
    utils.DirectStreamer.put = put
from transformers.cli.serve import Serve
Serve(force_model="model", host="127.0.0.1", port=int(sys.argv[2]), device=sys.argv[3], dtype=sys.argv[4],
      log_level="warning")
"""

SIZES = {
    # ~110 M parameters: big enough that a decode step is real GPU work, small enough to build in seconds
    "gpu": {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8, "num_attention_heads": 16,
            "num_key_value_heads": 4},
    "cpu": {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
            "num_key_value_heads": 1},
}  # fmt: skip


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def left(budget: float) -> float:
    return budget - (time.monotonic() - T0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(url: str, body: dict[str, Any] | None = None, timeout: float = 60.0) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, never a proxy
    try:
        with opener.open(req, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)


def make_models(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    base = work / "weights"
    size = dict(SIZES["cpu" if args.device == "cpu" else "gpu"], dtype=args.dtype)
    proc = subprocess.run(
        [args.server_python, "-c", MODEL_SCRIPT, str(base), json.dumps(size)],
        capture_output=True,
        text=True,
        timeout=max(30.0, left(args.budget) - 200),
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"model build failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}")
    info: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    info["size"] = size
    gen = {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "do_sample": False,
        "max_new_tokens": args.out_tokens,
        "min_new_tokens": args.out_tokens,  # transformers serve's ignore-eos: every request is --out long
        "suppress_tokens": info.pop("silent_tokens"),
    }
    for side, extra in (("A", {}), ("B", {"prompt_lookup_num_tokens": args.lookup})):
        d = work / side / "model"
        d.mkdir(parents=True, exist_ok=True)
        for f in base.iterdir():
            if f.name != "generation_config.json":
                (d / f.name).unlink(missing_ok=True)
                (d / f.name).symlink_to(f)
        (d / "generation_config.json").write_text(json.dumps({**gen, **extra}, indent=1))
        info[f"generation_config_{side}"] = {**gen, **extra}
    return info


def make_dataset(path: Path, count: int, out_tokens: int) -> None:
    """Repetitive prompts (a 12-word phrase said 8 times): prompt lookup has n-grams to find."""
    import random

    words = MODEL_SCRIPT.split('words = "', 1)[1].split('"', 1)[0].split(" ")
    rng = random.Random(15)
    with path.open("w") as fh:
        for _ in range(count):
            phrase = " ".join(rng.choice(words) for _ in range(12))
            fh.write(json.dumps({"prompt": " ".join([phrase] * 8), "max_tokens": out_tokens}) + "\n")


class Server:
    def __init__(self, side: str, args: argparse.Namespace, work: Path) -> None:
        self.side = side
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = work / f"server{side}.log"
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
        with self.log.open("w") as fh:
            self.proc = subprocess.Popen(
                [
                    args.server_python,
                    "-c",
                    SERVE_SCRIPT,
                    "fix" if args.usage_fix else "stock",
                    str(self.port),
                    args.device,
                    args.dtype,
                ],
                cwd=work / side,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: stopped whole, by pid
            )

    def wait_ready(self, deadline: float) -> float:
        start = time.monotonic()
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"server {self.side} exited {self.proc.returncode}:\n{self.tail()}")
            code, _ = http(self.url + "/health", timeout=2.0)
            if code == 200:
                return time.monotonic() - start
            time.sleep(0.5)
        raise SystemExit(f"server {self.side} not ready in time:\n{self.tail()}")

    def tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        return self.proc.returncode


def usage_check(server: Server, prompt: str, out_tokens: int) -> dict[str, Any]:
    """One request streamed and the same one not: the two ``completion_tokens`` should agree."""
    body = {"model": "model", "prompt": prompt, "max_tokens": out_tokens, "temperature": 0}
    code, text = http(server.url + "/v1/completions", body, timeout=120)
    plain = json.loads(text).get("usage", {}).get("completion_tokens") if code == 200 else f"HTTP {code}: {text[:200]}"
    code, text = http(server.url + "/v1/completions", {**body, "stream": True}, timeout=120)
    streamed: Any = f"HTTP {code}: {text[:200]}"
    events = 0
    if code == 200:
        for line in text.splitlines():
            if line.startswith("data: ") and line[6:].strip() != "[DONE]":
                events += 1
                obj = json.loads(line[6:])
                if isinstance(obj.get("usage"), dict):
                    streamed = obj["usage"].get("completion_tokens")
    return {"non_streamed": plain, "streamed": streamed, "stream_events": events, "agree": plain == streamed}


def cudastack(args: list[str], timeout: float, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "cudastack", *args]
    log("$ cudastack " + " ".join(args))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = proc.communicate(timeout=max(5.0, timeout))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # bench run saves every finished request on Ctrl-C
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        err += f"\n(kit: stopped with SIGINT after {timeout:.0f}s)"
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def gpu_state() -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "src"))
    from cudastack.bench.gpu import read_gpu_state

    return read_gpu_state()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="results folder (at most 8 files)")
    p.add_argument("--work", default="/tmp/h200kit", help="model folders and logs")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--server-python", default=sys.executable, help="the interpreter with transformers serve")
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--num-prompts", type=int, default=4, help="requests per trial")
    p.add_argument("--out-tokens", type=int, default=128)
    p.add_argument("--lookup", type=int, default=10, help="B's prompt_lookup_num_tokens")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--budget", type=float, default=420.0, help="seconds for everything")
    p.add_argument("--usage-fix", action=argparse.BooleanOptionalAction, default=True)
    args = p.parse_args(argv)
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"args": vars(args), "gpu_before": gpu_state()}
    log(f"gpu: {json.dumps(summary['gpu_before'])[:300]}")
    servers: list[Server] = []
    code = 1
    try:
        summary["model"] = make_models(args, work)
        log(f"model: {summary['model']['params']} parameters, torch {summary['model']['torch']}")
        data = work / "prompts.jsonl"
        make_dataset(data, args.warmup + args.trials * args.num_prompts + 8, args.out_tokens)
        servers = [Server("A", args, work), Server("B", args, work)]
        deadline = time.monotonic() + min(240.0, left(args.budget) - 120)
        summary["ready_s"] = {s.side: round(s.wait_ready(deadline), 1) for s in servers}
        log(f"servers ready: {summary['ready_s']}")
        prompt = json.loads(data.read_text().splitlines()[-1])["prompt"]
        summary["usage_check"] = {s.side: usage_check(s, prompt, args.out_tokens) for s in servers}
        log(f"usage check: {summary['usage_check']}")
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
        )
        a, b = out / "a.json", out / "b.json"
        run = cudastack(
            [
                "bench", "run", "--url", servers[0].url, "--url-b", servers[1].url, "--backend", "transformers",
                "--model", "model", "--dataset", f"jsonl:{data}", "--num-prompts", str(args.num_prompts),
                "--trials", str(args.trials), "--warmup", str(args.warmup), "--temperature", "0", "--ignore-eos",
                "--concurrency", "1", "--server-python", args.server_python,
                "--server-python-b", args.server_python, "--request-timeout", "120", "--trial-timeout", "200",
                "-o", str(a), "--output-b", str(b),
            ],
            left(args.budget) - 40,
            env,
        )  # fmt: skip
        summary["run"] = {"exit": run.returncode, "stderr_tail": run.stderr[-3000:]}
        log(f"bench run exit {run.returncode}")
        compare_txt = [f"$ cudastack bench run … (exit {run.returncode})", run.stdout, run.stderr[-2000:]]
        if a.exists() and b.exists():
            for fmt in ("human", "json"):
                cmp = cudastack(["bench", "compare", str(a), str(b), "--format", fmt], 60, env)
                if fmt == "json":
                    (out / "compare.json").write_text(cmp.stdout)
                else:
                    compare_txt += [f"$ cudastack bench compare a.json b.json (exit {cmp.returncode})", cmp.stdout]
                    print(cmp.stdout, flush=True)
            plot = cudastack(["bench", "plot", str(a), str(b), "-o", str(out / "ab.html")], 60, env)
            summary["plot_exit"] = plot.returncode
            code = run.returncode
        (out / "compare.txt").write_text("\n".join(compare_txt))
    finally:
        summary["server_exit"] = {s.side: s.stop() for s in servers}
        summary["gpu_after"] = gpu_state()
        summary["seconds"] = round(time.monotonic() - T0, 1)
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        if servers:
            (out / "servers.log").write_text("".join(f"===== server {s.side}\n{s.tail(20000)}\n" for s in servers))
        log(f"done in {summary['seconds']}s; files: {sorted(f.name for f in out.iterdir())}")
    return code


if __name__ == "__main__":
    sys.exit(main())
