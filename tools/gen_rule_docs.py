"""Write docs/rules/<CODE>.md from the rule docstrings (never edit those pages by hand)."""

from __future__ import annotations

from pathlib import Path

from cudastack.checks import all_rules


def main() -> None:
    out = Path(__file__).resolve().parents[1] / "docs" / "rules"
    out.mkdir(parents=True, exist_ok=True)
    index = [
        "# Rules\n",
        "Generated from the rule docstrings by `tools/gen_rule_docs.py`.\n",
        "| code | name | severity | summary |",
        "|---|---|---|---|",
    ]
    for r in all_rules():
        (out / f"{r.code}.md").write_text(
            f"# {r.code} {r.name}\n\n{r.summary}. Default severity: {r.severity}.\n\n{r.doc}\n"
        )
        index.append(f"| [{r.code}]({r.code}.md) | {r.name} | {r.severity} | {r.summary} |")
    (out / "README.md").write_text("\n".join(index) + "\n")


if __name__ == "__main__":
    main()
