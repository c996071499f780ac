"""The one way cudastack runs git, and what it knows about a checkout's git configuration.

A source checkout is the target's code: its ``.git/config``, its hooks and its ``.gitattributes``
can each make git run a command (``core.fsmonitor``, ``core.pager``, ``diff.external``, textconv,
clean/smudge filters, merge drivers, hooks, signing programs, credential helpers, ssh commands).
Every git call in cudastack goes through :class:`Git`, which switches off every one of them that a
fixed ``-c`` can switch off (:data:`SAFE_CONFIG`), and the filters and textconv drivers per name
(their names come from the checkout's own configuration, so they are passed through
``GIT_CONFIG_KEY_<n>``, never parsed out of an argument). What cannot be switched off that way (a
filter or merge driver that an attribute selects, an include that may change with the branch, the
transport commands of a fetch) is found by :func:`scan_config` and :func:`scan_attributes`, and the
commands that write refuse on it (``patches/git.py``).

git's own protections stay as they are: ``safe.directory`` is never set, and nothing here runs git
on a repository git itself would refuse.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass, field

from cudastack.errors import CudastackError
from cudastack.faults import KILL_ENV
from cudastack.files import open_file

__all__ = [
    "DIFF_COMMANDS",
    "SAFE_CONFIG",
    "ConfigEntry",
    "Git",
    "GitError",
    "Hazards",
    "scan_attributes",
    "scan_config",
]


class GitError(CudastackError, RuntimeError):
    """A git command that failed or could not run."""


SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),  # a command run by status, diff, add, checkout, ...
    ("core.hooksPath", "/dev/null"),  # no hook runs: not .git/hooks, not a configured directory
    ("core.pager", "cat"),  # with --no-pager and GIT_PAGER=cat, belt and braces
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.askPass", ""),
    ("credential.helper", ""),  # the empty value empties the helper list (gitcredentials(7))
    ("diff.external", ""),  # and --no-ext-diff on every command that diffs
    ("commit.gpgSign", "false"),  # gpg.program / gpg.<format>.program never run
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("merge.verifySignatures", "false"),
    ("gc.auto", "0"),  # no background gc/maintenance after a write
    ("maintenance.auto", "false"),
    ("protocol.ext.allow", "never"),  # ext:: URLs run a command
    ("core.quotepath", "off"),
    ("advice.detachedHead", "false"),
)
"""Passed as ``-c key=value`` to every git call: each switches off a way config makes git run a
command. A ``-c`` wins over every configuration file, the checkout's included."""

DIFF_COMMANDS = frozenset({"diff", "show", "log", "format-patch"})
"""Commands that take ``--no-ext-diff --no-textconv`` (inserted after the command name).
``range-diff`` (git 2.39) does not pass them on to the ``git log`` it runs: textconv drivers
are replaced by ``cat`` for it (see :meth:`Git.neutralising_config`); it does pass --no-ext-diff."""

_DROP_ENV = (
    KILL_ENV,
    "GIT_EXTERNAL_DIFF",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    scope: str
    """``system``, ``global``, ``local``, ``worktree`` or ``command``."""
    origin: str
    """Where git read it (``file:.git/config``)."""
    key: str
    """As git prints it: section and variable lower case, subsection as written."""
    value: str

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def subsection(self) -> str | None:
        parts = self.key.split(".")
        return ".".join(parts[1:-1]) if len(parts) > 2 else None

    @property
    def variable(self) -> str:
        return self.key.rsplit(".", 1)[-1]

    @property
    def from_checkout(self) -> bool:
        """Set by the checkout itself (``.git/config``, ``config.worktree``, what they include)."""
        return self.scope in ("local", "worktree")

    def where(self) -> str:
        return f"{self.key}={self.value!r} ({self.scope} {self.origin.removeprefix('file:')})"


@dataclass(frozen=True, slots=True)
class Git:
    """git on one checkout, with every override above; ``error`` is what a failure raises."""

    repo: str
    error: type[CudastackError] = GitError
    timeout: float | None = None
    _cache: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def _env(self, extra: dict[str, str] | None, *, neutralise: bool = True) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
        env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", PAGER="cat")
        env.update(GIT_EDITOR="true", GIT_SEQUENCE_EDITOR="true")
        pairs = self.neutralising_config() if neutralise else []
        if pairs:
            try:
                n = int(env.get("GIT_CONFIG_COUNT", "0"))
            except ValueError:
                n = 0
            for i, (k, v) in enumerate(pairs, n):
                env[f"GIT_CONFIG_KEY_{i}"] = k
                env[f"GIT_CONFIG_VALUE_{i}"] = v
            env["GIT_CONFIG_COUNT"] = str(n + len(pairs))
        env.update(extra or {})
        return env

    def _argv(self, args: tuple[str, ...]) -> list[str]:
        argv = ["git", "--no-pager"]
        for k, v in SAFE_CONFIG:
            argv += ["-c", f"{k}={v}"]
        if args and args[0] in DIFF_COMMANDS:
            args = (args[0], "--no-ext-diff", "--no-textconv", *args[1:])
        return [*argv, *args]

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        check: bool = True,
        input: bytes | None = None,
        _neutralise: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        argv = self._argv(args)
        try:
            proc = subprocess.run(
                argv,
                cwd=self.repo,
                env=self._env(env, neutralise=_neutralise),
                capture_output=True,
                input=input if input is not None else b"",
                check=False,
                timeout=self.timeout,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise self.error(f"git {' '.join(args[:3])} could not run in {self.repo}: {exc}") from exc
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip() or proc.stdout.decode(errors="replace").strip()
            raise self.error(f"git {' '.join(args[:3])} failed: {err[-800:]}")
        return proc

    def out(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
        return self.run(*args, env=env, check=check).stdout.decode(errors="surrogateescape").strip()

    def lines(self, *args: str, env: dict[str, str] | None = None) -> list[str]:
        text = self.run(*args, env=env).stdout.decode(errors="surrogateescape")
        return [line for line in text.split("\0" if "-z" in args else "\n") if line]

    @property
    def git_dir(self) -> str:
        return os.path.join(self.repo, self.out("rev-parse", "--git-dir"))

    def config(self) -> list[ConfigEntry]:
        """Every configuration entry git reads here, with scope and origin (includes followed).
        Reading configuration runs nothing. Read once per :class:`Git`."""
        cached = self._cache.get("config")
        if isinstance(cached, list):
            return cached
        proc = self.run("config", "--list", "-z", "--show-scope", "--show-origin", check=False, _neutralise=False)
        fields = proc.stdout.decode(errors="surrogateescape").split("\0")
        entries: list[ConfigEntry] = []
        for i in range(0, len(fields) - 2, 3):
            key, _, value = fields[i + 2].partition("\n")
            entries.append(ConfigEntry(fields[i], fields[i + 1], key, value))
        self._cache["config"] = entries
        return entries

    def neutralising_config(self) -> list[tuple[str, str]]:
        """Per-name overrides: every configured filter emptied and made optional (git then reads
        and writes the bytes as they are), every textconv replaced by ``cat``."""
        cached = self._cache.get("neutral")
        if isinstance(cached, list):
            return cached
        pairs: list[tuple[str, str]] = []
        seen: set[tuple[str, str]] = set()
        for e in self.config():
            sub = e.subsection
            if sub is None or e.scope == "command":
                continue
            if e.section == "filter" and ("filter", sub) not in seen:
                seen.add(("filter", sub))
                pairs += [(f"filter.{sub}.{v}", "") for v in ("clean", "smudge", "process")]
                pairs.append((f"filter.{sub}.required", "false"))
            elif e.section == "diff" and e.variable == "textconv" and ("diff", sub) not in seen:
                seen.add(("diff", sub))
                pairs.append((f"diff.{sub}.textconv", "cat"))
        self._cache["neutral"] = pairs
        return pairs


@dataclass(frozen=True, slots=True)
class Hazards:
    """What in a checkout's configuration would make git run a command."""

    refused: tuple[str, ...] = ()
    """Not switched off by cudastack: a command that writes must refuse."""
    neutralised: tuple[str, ...] = ()
    """Configured, and switched off by cudastack's overrides for every git call."""


_NEUTRALISED_KEYS = {
    "core.fsmonitor": "switched off (-c core.fsmonitor=false)",
    "core.hookspath": "no hook runs (-c core.hooksPath=/dev/null)",
    "core.pager": "--no-pager",
    "core.editor": "GIT_EDITOR=true",
    "sequence.editor": "GIT_SEQUENCE_EDITOR=true",
    "core.askpass": "-c core.askPass=",
    "credential.helper": "-c credential.helper=",
    "diff.external": "--no-ext-diff",
    "gpg.program": "-c commit.gpgSign=false",
}
_FETCH_KEYS = ("core.sshcommand", "core.gitproxy", "core.alternaterefscommand")
_FETCH_REMOTE_VARS = ("uploadpack", "receivepack", "vcs", "proxy")


def scan_config(git: Git, *, attributes: dict[str, set[str]], fetch: bool = False) -> Hazards:
    """Name every configured thing that would run a command.

    ``attributes`` maps ``filter``/``merge``/``diff`` to the driver names the attribute files
    select (:func:`scan_attributes`). With ``fetch``, transport commands are refused as well."""
    refused: list[str] = []
    neutral: list[str] = []
    for e in git.config():
        if e.scope == "command":
            continue
        key = e.key.lower()
        sub = e.subsection
        if e.section == "filter" and sub and e.variable in ("clean", "smudge", "process") and e.value:
            if sub in attributes.get("filter", set()):
                refused.append(f"filter driver {e.where()}, selected by .gitattributes (filter={sub})")
            else:
                neutral.append(f"{e.where()}: not selected; emptied for every call")
        elif e.section == "merge" and sub and e.variable == "driver":
            if sub in attributes.get("merge", set()) or any(
                x.key.lower() == "merge.default" and x.value == sub for x in git.config()
            ):
                refused.append(f"merge driver {e.where()}, selected (merge={sub})")
        elif e.section == "diff" and sub and e.variable in ("textconv", "command"):
            neutral.append(f"{e.where()}: --no-ext-diff --no-textconv (textconv replaced by cat)")
        elif e.section == "gpg" and e.variable == "program":
            neutral.append(f"{e.where()}: -c commit.gpgSign=false")
        elif e.section == "pager" or key == "core.pager":
            neutral.append(f"{e.where()}: --no-pager")
        elif key in _FETCH_KEYS or (e.section == "remote" and e.variable in _FETCH_REMOTE_VARS):
            if fetch and e.from_checkout:
                refused.append(f"{e.where()}: a fetch would run it")
        elif key in _NEUTRALISED_KEYS or (e.section == "credential" and e.variable == "helper"):
            if e.from_checkout or key == "core.fsmonitor":
                neutral.append(f"{e.where()}: {_NEUTRALISED_KEYS.get(key, '-c credential.helper=')}")
        elif (key == "include.path" or (e.section == "includeif" and e.variable == "path")) and e.from_checkout:
            refused.append(f"{e.where()}: an include in the checkout's config (it may change with the branch)")
    neutral.extend(f"hook {h}: not run (-c core.hooksPath=/dev/null)" for h in _hooks(git))
    return Hazards(tuple(refused), tuple(neutral))


def _hooks(git: Git) -> list[str]:
    dirs = [os.path.join(git.git_dir, "hooks")]
    for e in git.config():
        if e.key.lower() == "core.hookspath" and e.scope != "command" and e.value:
            dirs.append(os.path.join(git.repo, os.path.expanduser(e.value)))
    found = []
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            p = os.path.join(d, n)
            try:
                st = os.stat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111 and not n.endswith(".sample"):
                found.append(os.path.relpath(p, git.repo))
    return found


ATTRIBUTE_FILE = ".gitattributes"


def attribute_texts(git: Git, revs: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Every attribute file git reads here or would read after checking out ``revs``:
    ``.gitattributes`` at any depth (tracked or not), ``$GIT_DIR/info/attributes``,
    ``core.attributesFile``, and the ``.gitattributes`` files in the trees of ``revs``."""
    out: list[tuple[str, str]] = []
    paths = [os.path.join(git.git_dir, "info", "attributes")]
    for e in git.config():
        if e.key.lower() == "core.attributesfile" and e.value:
            paths.append(os.path.expanduser(e.value))
    for rel in git.lines(
        "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", f":(glob)**/{ATTRIBUTE_FILE}"
    ):
        paths.append(os.path.join(git.repo, rel))
    for p in dict.fromkeys(paths):
        try:
            with open_file(p) as fh:  # the checkout's to choose: a FIFO there must not block
                out.append((p, fh.read(1 << 20).decode(errors="replace")))
        except OSError:
            continue
    for rev in revs:
        for line in git.lines("ls-tree", "-r", "-z", "--full-tree", rev):
            meta, _, path = line.partition("\t")
            if os.path.basename(path) == ATTRIBUTE_FILE and meta.split()[1] == "blob":
                blob = git.run("cat-file", "blob", meta.split()[2]).stdout[: 1 << 20]
                out.append((f"{rev[:12]}:{path}", blob.decode(errors="replace")))
    return out


def scan_attributes(texts: list[tuple[str, str]]) -> dict[str, set[str]]:
    """The driver names that attribute lines (macros included) select, per attribute."""
    selected: dict[str, set[str]] = {"filter": set(), "merge": set(), "diff": set()}
    for _where, text in texts:
        for line in text.splitlines():
            for word in line.split("#", 1)[0].split()[1:]:
                name, eq, value = word.partition("=")
                if eq and name in selected:
                    selected[name].add(value)
    return selected
