"""``cudastack install`` asks the plan first: an install predicted to add an error is refused
before anything changes (exit 4), unless ``--allow-errors CODE…`` names every code it adds."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cudastack.errors import CudastackError
from cudastack.findings import Finding
from cudastack.plan.candidate import judge_candidate, judge_today
from cudastack.plan.fetch import WheelCache
from cudastack.plan.resolve import start_resolve
from cudastack.target import Target


class PredictedErrorsError(CudastackError, RuntimeError):
    """The plan predicts that the install adds an error: refused, nothing was changed."""

    exit_code = 4


def check_install(
    target: Target,
    args: list[str],
    *,
    allow: Sequence[str],
    progress: Callable[[str], None],
    installer: str = "pip",
) -> tuple[Finding, ...]:
    """The new errors the install is predicted to add that ``allow`` accepts (raises
    :class:`PredictedErrorsError` for any other). A plan that cannot be made (a source build, a
    download failure) refuses nothing: the install's own check after the install still runs."""
    pending = start_resolve(target, args, installer)  # resolves while today's environment is judged
    today = judge_today(target, gpus=(), driver=None)
    cand = judge_candidate(today, "install", args, cache=WheelCache(progress=progress), progress=progress,
                           resolution=pending)  # fmt: skip
    if cand.failure:
        progress(f"no prediction before the install ({cand.failure[:300]}); judging after it instead")
        return ()
    allowed = {c.upper() for c in allow}
    accepted = tuple(f for f in cand.new_errors if f.code in allowed or f.code[:3] in allowed)
    refused = [f for f in cand.new_errors if f not in accepted]
    if refused:
        shown = "; ".join(f"{f.code} {f.message}" + (f" ({f.path})" if f.path else "") for f in refused[:5])
        raise PredictedErrorsError(
            f"the install is predicted to add {len(refused)} error(s), so nothing was changed: {shown}",
            hint="cudastack plan -- <the same arguments> shows the prediction; "
            f"--allow-errors {' '.join(sorted({f.code for f in refused}))} installs anyway",
        )
    if accepted:
        progress(f"installing despite {len(accepted)} predicted error(s) (--allow-errors): "
                 + ", ".join(sorted({f.code for f in accepted})))  # fmt: skip
    return accepted
