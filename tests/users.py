"""An unprivileged user for tests whose point is a permission (root reads any file whatever its
mode): as root, a system user is created once (``useradd``) and commands run as it through
``setpriv``; as any other user, commands run as that user, who is unprivileged already."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import oracles

NAME = "cudastack-test"


@dataclass(frozen=True)
class User:
    uid: int
    gid: int
    prefix: tuple[str, ...]
    """What runs a command as this user (empty when the tests already run unprivileged)."""

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("timeout", 120)
        kwargs.setdefault("check", False)
        return subprocess.run([*self.prefix, *argv], **kwargs)

    def mkdtemp(self) -> Path:
        """A fresh directory this user owns, under a path every user can traverse (pytest's
        tmp_path lives in a directory only its owner may enter)."""
        d = Path(tempfile.mkdtemp(prefix="cudastack-user-", dir="/tmp"))
        d.chmod(0o755)
        if self.prefix:
            os.chown(d, self.uid, self.gid)
        return d


def unprivileged_user() -> User:
    if os.geteuid() != 0:
        return User(uid=os.getuid(), gid=os.getgid(), prefix=())
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        oracles.missing("setpriv (util-linux) is not installed: cannot run as an unprivileged user")
    try:
        entry = pwd.getpwnam(NAME)
    except KeyError:
        useradd = shutil.which("useradd")
        if useradd is None:
            oracles.missing("useradd is not installed: cannot create an unprivileged user")
        made = subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode not in (0, 9):  # 9: created meanwhile by another test session
            oracles.missing(f"useradd {NAME} failed: {made.stderr.strip()}")
        entry = pwd.getpwnam(NAME)
    prefix = (setpriv, f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups")
    user = User(uid=entry.pw_uid, gid=entry.pw_gid, prefix=prefix)
    probe = user.run([sys.executable, "-c", "import cudastack"], cwd="/")
    if probe.returncode != 0:  # e.g. a venv or checkout under a 0700 home: the user cannot reach it
        oracles.missing(f"{NAME} cannot run {sys.executable} with cudastack: {probe.stderr.strip()[-200:]}")
    return user
