"""The human rendering: header with the stack, findings grouped by package, most severe first."""

from __future__ import annotations

from collections import defaultdict
from typing import IO, Any

from cudastack.findings import Finding, Outcome, Severity
from cudastack.report import Report

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
# Names and paths come from the inspected environment: a dist-info named with an escape sequence
# (OSC 52 writes the clipboard, others move the cursor over a fix line) must reach the terminal as
# something visible. Each control character becomes its Unicode control picture (ESC -> U+241B),
# one character for one, so rich's style spans stay where they were; newline and tab are kept.
_VISIBLE = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)} | {0x7F: 0x2421}
_VISIBLE |= {c: 0xFFFD for c in range(0x80, 0xA0)}


def visible(text: str) -> str:
    """``text`` with every control character but newline and tab shown as a visible character:
    for any line cudastack writes to a terminal that holds names or paths it did not choose."""
    return text.translate(_VISIBLE)


def _visible(obj: object) -> object:
    from rich.text import Text

    if isinstance(obj, str):
        return obj.translate(_VISIBLE)
    if isinstance(obj, Text):
        text = obj.copy()
        text.plain = text.plain.translate(_VISIBLE)
        return text
    return obj


def render_human(
    report: Report, out: IO[str], *, color: bool, verbose: bool = False, all_modules: bool = False
) -> None:
    """Write the report for a person. rich is imported here only, where it is used."""
    from rich.console import Console
    from rich.markup import escape
    from rich.text import Text

    class _Console(Console):
        def print(self, *objects: Any, **kwargs: Any) -> None:
            super().print(*(_visible(o) for o in objects), **kwargs)

    console = _Console(
        file=out,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        soft_wrap=True,
        width=None if color else 10_000,
    )
    t = report.target
    console.print(Text("cudastack " + report.command, style="bold"))
    py = t.get("python") or "(no interpreter)"
    console.print(f"  target     {escape(str(py))}  [dim]({escape(str(t.get('origin')))})[/dim]")
    console.print(
        f"  python     {t.get('python_version') or 'unknown'}  [dim]{escape(str(t.get('python_version_source')))}[/dim]"
    )
    console.print(f"  platform   {t.get('platform')}, glibc {t.get('glibc') or 'unknown'}")
    gpu = t.get("gpu")
    if isinstance(gpu, dict):
        gpus = gpu.get("gpus") or []
        if gpus:
            names = ", ".join(f"{g['index']}: {g['name']} ({g['compute_capability']})" for g in gpus)
            console.print(f"  gpus       {escape(names)}  [dim]{escape(str(gpu.get('gpus_source')))}[/dim]")
        else:
            console.print(f"  gpus       none  [dim]{escape(str(gpu.get('gpus_source')))}[/dim]")
        console.print(
            f"  driver     {escape(str(gpu.get('driver') or 'none'))}  "
            f"[dim]{escape(str(gpu.get('driver_source')))}[/dim]"
        )
    if report.stack:
        parts = [f"{k} {v}" for k, v in report.stack.items() if k != "torch.cuda"]
        if "torch.cuda" in report.stack:
            cuda = report.stack["torch.cuda"]
            parts.insert(1, f"CUDA {cuda} (torch's)" if cuda[:1].isdigit() else "CPU build of torch")
        console.print("  stack      " + escape(", ".join(parts)))
    n = report.extra.get("distributions")
    if n is not None:
        console.print(f"  [dim]{n} distributions read, nothing imported[/dim]")
    console.print()

    listed = [f for f in report.findings if f.severity >= Severity.WARNING or verbose]
    by_key: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for f in listed:
        by_key[(f.code, f.subject)].append(f)
    # a consequence is shown under its root cause (the cause first), not in a group of its own
    effects: dict[int, list[Finding]] = defaultdict(list)
    groups: dict[str, list[Finding]] = defaultdict(list)

    def cause_of(f: Finding) -> Finding | None:
        found = (
            [c for c in by_key.get((f.caused_by.code, f.caused_by.subject), ()) if c is not f] if f.caused_by else []
        )
        if len(found) > 1:  # one library missing for several distributions: the one the effect names
            text = " ".join((f.message, *f.evidence)).lower()
            found = [c for c in found if c.distribution and c.distribution in text] or found[:1]
        return found[0] if found else None

    for f in listed:
        root = cause_of(f)
        if root is not None and cause_of(root) is None:
            effects[id(root)].append(f)
        else:
            groups[f.distribution or "(environment)"].append(f)

    def show(f: Finding, depth: int) -> None:
        pad = "    " * depth
        tag = " (in baseline)" if report.is_baselined(f) else ""
        lead = f"{pad}  {'↳ ' if depth else ''}{f.severity} "
        console.print(Text.assemble((lead, _STYLE[f.severity]), (f.code, "bold"), " ", f.message, (tag, "dim")))
        for ev in f.evidence[: None if verbose else 4]:
            console.print(Text(pad + "      " + ev, style="dim"))
        if not verbose and len(f.evidence) > 4:
            console.print(Text(f"{pad}      … {len(f.evidence) - 4} more (--verbose)", style="dim"))
        for h in f.hints:
            console.print(Text.assemble((pad + "    hint: ", "cyan"), h))
        if f.caused_by:
            console.print(Text(f"{pad}    caused by {f.caused_by.code} {f.caused_by.subject}", style="dim"))
        if f.fix:
            console.print(Text.assemble((pad + "    fix: ", "green"), f.fix.summary))
            for cmd in f.fix.commands:
                console.print(Text(pad + "      $ " + cmd))
        if depth == 0:
            for e in sorted(effects.get(id(f), ()), key=lambda e: (-e.severity, e.code, e.subject)):
                show(e, 1)

    def worst(fs: list[Finding]) -> int:
        return max(int(g.severity) for f in fs for g in (f, *effects.get(id(f), ())))

    order = sorted(groups, key=lambda g: (-worst(groups[g]), g))
    for group in order:
        console.print(Text(group, style="bold underline"))
        for f in sorted(groups[group], key=lambda f: (-worst([f]), -f.severity, f.code)):
            show(f, 0)
        console.print()

    modules = report.extra.get("modules")
    if isinstance(modules, list) and modules:
        failing = [m for m in modules if m.get("predicted") == "fails" and not m.get("optional")]
        shown = modules if all_modules else failing
        loader = report.extra.get("loader")
        n_mod = sum(1 for m in modules if m.get("kind") == "module")
        console.print(
            Text(
                f"native files: {n_mod} extension modules, {len(modules) - n_mod} libraries; "
                f"{len(failing)} predicted to fail at import",
                style="bold",
            )
        )
        if isinstance(loader, dict) and loader.get("torch_state"):
            console.print(Text(f"  {loader['torch_state']}", style="dim"))
        for m in shown:
            why = ", ".join(f"{c['code']} {c['subject']}" for c in m.get("caused_by", []))
            optional = m["predicted"] == "fails" and m.get("optional")
            style = (
                "red"
                if m["predicted"] == "fails" and not optional
                else ("dim" if optional or m["predicted"] == "on-demand" else "")
            )
            label = "optional" if optional else m["predicted"]
            console.print(Text(f"  {label:<9} {m['path']}" + (f"  ← {why}" if why else ""), style=style))
        if not all_modules and len(modules) > len(shown):
            console.print(
                Text(f"  ({len(modules) - len(shown)} others load or are on-demand: --all lists them)", style="dim")
            )
        console.print()

    gpus = report.extra.get("gpus")
    if isinstance(gpus, list) and gpus:
        for g in gpus:
            files = g.get("files", [])
            counts: dict[str, int] = defaultdict(int)
            for f in files:
                counts[f["verdict"]] += 1
            summary = ", ".join(f"{n} {v}" for v, n in counts.items()) or "no device code"
            console.print(
                Text(
                    f"GPU {g['index']} {g['name']} (compute {g['compute_capability']}): "
                    f"{len(files)} files with device code: {summary}",
                    style="bold",
                )
            )
            for f in files:
                if all_modules or f["verdict"] not in ("runs", "no-kernels"):
                    style = "red" if f["verdict"] in ("no-kernel-image", "ptx-too-new") else ""
                    console.print(Text(f"  {f['verdict']:<15} {f['path']}", style=style))
        console.print()

    errored = [c for c in report.checks if c.outcome is Outcome.ERROR]
    for c in errored:
        console.print(
            Text.assemble(("error: ", "bold red"), f"check {c.code} ({c.name}) failed inside cudastack: {c.reason}")
        )
    if verbose:
        for c in report.checks:
            if c.outcome is Outcome.SKIP:
                console.print(Text(f"  skipped {c.code} {c.name}: {c.reason}", style="dim"))
    counts = report.counts()
    hidden = counts["info"] if not verbose else 0
    ran = sum(1 for c in report.checks if c.outcome in (Outcome.PASS, Outcome.FAIL))
    skipped = sum(1 for c in report.checks if c.outcome is Outcome.SKIP)
    summary = (
        f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info"
        f"{f' ({hidden} shown with --verbose)' if hidden else ''}; {ran} checks ran, {skipped} skipped"
    )
    loader = report.extra.get("loader")
    not_run = loader.get("skipped") if isinstance(loader, dict) else None
    if not_run:  # every check of the loader model skipped for one reason: the summary says which
        codes = [c.code for c in report.checks if c.outcome is Outcome.SKIP and c.reason == not_run]
        if codes:
            summary += f"; {len(codes)} loader checks not run ({', '.join(codes)}): {not_run}"
    baselined = sum(1 for f in report.findings if report.is_baselined(f))
    if baselined:
        summary += f"; {baselined} in baseline"
    if errored:  # a crashed check judged nothing: never "OK" over it
        summary = f"{len(errored)} check(s) crashed ({', '.join(c.code for c in errored)}); " + summary
    style = "bold red" if report.gating or errored else "bold green"
    verdict = "CRASHED" if errored else "FAIL" if report.gating else "OK"
    console.print(
        Text.assemble(
            (verdict + " ", style), summary, (f"  (exit {int(report.exit_code)}, fail-on {report.fail_on})", "dim")
        )
    )
    cached = report.extra.get("result_cache")
    if isinstance(cached, dict) and isinstance(cached.get("message"), str):
        console.print(Text(cached["message"], style="dim"))
