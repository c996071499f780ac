"""``cudastack install`` asks the plan first: an install predicted to add an error is refused
before anything changes (exit 4), unless ``--allow-errors CODE…`` names every code it adds."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cudastack.errors import CudastackError
from cudastack.findings import Finding
from cudastack.plan.candidate import judge_candidate, judge_today
from cudastack.plan.fetch import WheelCache
from cudastack.plan.resolve import start_resolve
from cudastack.target import Target


class PredictedErrorsError(CudastackError, RuntimeError):
    """The plan predicts that the install adds an error: refused, nothing was changed."""

    exit_code = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """What the plan predicted before an install that it did not refuse."""

    accepted: tuple[Finding, ...] = ()
    """New errors predicted and accepted by ``--allow-errors``."""
    skipped: str | None = None
    """Why no prediction was made (the plan could not be computed), else ``None``."""
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": "skipped" if self.skipped else "judged",
            "why": self.skipped,
            "accepted": sorted({f.code for f in self.accepted}),
            "seconds": round(self.seconds, 3),
        }


def check_install(
    target: Target,
    args: list[str],
    *,
    allow: Sequence[str],
    progress: Callable[[str], None],
    installer: str = "pip",
) -> Prediction:
    """The new errors the install is predicted to add that ``allow`` accepts (raises
    :class:`PredictedErrorsError` for any other). A plan that cannot be made (a source build, a
    download failure, an index out of reach) refuses nothing and says why (``skipped``): the
    install's own check after the install still runs."""
    t0 = time.perf_counter()
    pending = start_resolve(target, args, installer)  # resolves while today's environment is judged
    today = judge_today(target, gpus=(), driver=None)
    cand = judge_candidate(today, "install", args, cache=WheelCache(progress=progress), progress=progress,
                           resolution=pending)  # fmt: skip
    if cand.failure:
        return Prediction(skipped=cand.failure, seconds=time.perf_counter() - t0)
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
    return Prediction(accepted=accepted, seconds=time.perf_counter() - t0)
