"""``cudastack patches status`` on a checkout the size of SGLang (~3k files), side by side with
``git status`` on the same checkout, in one run.

    python bench/bench_patches.py [--files 3000] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudastack.patches.git import open_repo
from cudastack.patches.ops import status

ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
       "GIT_COMMITTER_EMAIL": "b@b"}  # fmt: skip


def sh(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        sh(repo, "init", "-q", "-b", "main")
        for i in range(args.files):
            d = repo / "python" / f"pkg{i % 60}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"mod{i}.py").write_text("".join(f"x{j} = {j}\n" for j in range(60)))
        sh(repo, "add", "-A")
        sh(repo, "commit", "-q", "-m", "v0.5.8")
        sh(repo, "tag", "v0.5.8")
        for i in range(5):  # five local commits, edits, an untracked file
            (repo / "python" / "pkg1" / f"mod{i * 60 + 1}.py").write_text("local\n")
            sh(repo, "commit", "-q", "-am", f"local fix {i}")
        (repo / "python" / "pkg2" / "mod2.py").write_text("wip\n")
        (repo / "notes.txt").write_text("untracked\n")
        git = open_repo(str(repo))
        ours, theirs = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            st = status(git)
            ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, check=True)
            theirs.append(time.perf_counter() - t0)
        o, t = statistics.median(ours), statistics.median(theirs)
        print(f"{args.files} files, {len(st.patches)} patches found\n")
        print("| tool | median | ratio |\n|---|---|---|")
        print(f"| `git status --porcelain` | {t * 1000:.0f} ms | 1× |")
        print(f"| `cudastack patches status` (in-process) | {o * 1000:.0f} ms | {o / t:.1f}× |")


if __name__ == "__main__":
    main()
