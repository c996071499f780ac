"""``bench plot``: one self-contained HTML page comparing the latency distributions of two runs.

Empirical CDFs of TTFT, TPOT, ITL (per token) and E2E for A and B as inline SVG, plus the
compare table — no plotting library (the tool is installed into environments it diagnoses, so
an optional matplotlib would be one more thing that may be missing). Pure: returns the page.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from cudastack.bench.client import RequestRecord
from cudastack.bench.metrics import itls, tpot, ttft
from cudastack.bench.stats import percentile

W, H, PAD = 420, 240, 40
COLORS = ("#1f77b4", "#ff7f0e")


def _values(records: Sequence[RequestRecord], metric: str) -> list[float]:
    ok = [r for r in records if r.ok]
    if metric == "ttft":
        return [x * 1000 for r in ok if (x := ttft(r)) is not None]
    if metric == "tpot":
        return [x * 1000 for r in ok if (x := tpot(r)) is not None]
    if metric == "itl":
        return [x * 1000 for r in ok for x in itls(r)]
    return [r.end * 1000 for r in ok]


def _cdf_svg(title: str, series: Sequence[tuple[str, list[float]]]) -> str:
    top = max((percentile(v, 99) or 0.0 for _, v in series if v), default=0.0) or 1.0
    parts = [
        f'<svg width="{W}" height="{H}" xmlns="http://www.w3.org/2000/svg" font-size="11">',
        f'<text x="{W / 2}" y="14" text-anchor="middle">{html.escape(title)} (ms, CDF to p99)</text>',
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" stroke="#000"/>',
        f'<line x1="{PAD}" y1="20" x2="{PAD}" y2="{H - PAD}" stroke="#000"/>',
        f'<text x="{W - 10}" y="{H - PAD + 14}" text-anchor="end">{top:.3g}</text>',
        f'<text x="{PAD}" y="{H - PAD + 14}">0</text>',
    ]
    for i, (name, values) in enumerate(series):
        xs = sorted(values)
        if not xs:
            continue
        pts = []
        for k, x in enumerate(xs):
            px = PAD + (W - 10 - PAD) * min(x / top, 1.0)
            py = (H - PAD) - (H - PAD - 20) * (k + 1) / len(xs)
            pts.append(f"{px:.1f},{py:.1f}")
        color = COLORS[i % len(COLORS)]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{" ".join(pts)}"/>')
        parts.append(
            f'<text x="{W - 10}" y="{H - PAD - 8 - 14 * i}" text-anchor="end" fill="{color}">'
            f"{html.escape(name)} (n={len(xs)})</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def render_plot_html(a: dict[str, Any], b: dict[str, Any], name_a: str, name_b: str, verdict: dict[str, Any]) -> str:
    charts = [
        _cdf_svg(
            metric.upper(),
            [(f"A {name_a}", _values(a["_records"], metric)), (f"B {name_b}", _values(b["_records"], metric))],
        )
        for metric in ("ttft", "tpot", "itl", "e2e")
    ]
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(c))}</td>"
            for c in (
                r["load"],
                r["label"],
                r["median_a"],
                r["median_b"],
                "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
                "unbounded" if r["ci"] is None else f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]",
                r["verdict"],
            )
        )
        + "</tr>"
        for r in verdict["rows"]
    )
    return (
        "<!doctype html><meta charset='utf-8'><title>cudastack bench plot</title>"
        f"<h1>A: {html.escape(name_a)} — B: {html.escape(name_b)}</h1>"
        + "".join(charts)
        + "<table border='1' cellpadding='3'><tr><th>load</th><th>metric</th><th>median A</th><th>median B</th>"
        "<th>B/A</th><th>95% CI</th><th>verdict</th></tr>" + rows + "</table>\n"
    )
