"""The line budgets of the package and the tests, against what the code alone takes.

The budgets count ``wc -l`` on ``*.py``. Beside each count this prints the code lines alone (no blank line,
comment or docstring): the size if every PEP 8 blank line and every docstring went, so what a budget asks
of the code itself, and the code cut it needs at today's share of blank lines and docstrings.

    python scripts/line_budget.py [--source DIR]

``--source`` counts another checkout (an older commit unpacked with ``git archive``).
"""

from __future__ import annotations

import argparse
import io
import tokenize
from pathlib import Path

BUDGETS = {"mixins/analysis": 7_368, "mixins": 10_000, "tests": 11_000}
_LAYOUT = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT, tokenize.ENDMARKER}


def code_lines(source: str) -> int:
    """Lines holding a token that is not a comment or a docstring (a string standing as a statement)."""
    lines: set[int] = set()
    statement_start = True
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in _LAYOUT:
            statement_start = statement_start or token.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            continue
        if not (statement_start and token.type == tokenize.STRING):
            lines.update(range(token.start[0], token.end[0] + 1))
        statement_start = False
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path(__file__).resolve().parent.parent)
    root = parser.parse_args().source
    print(f"{'area':<16} {'lines':>7} {'code':>7} {'budget':>7}  code cut needed at today's share")
    for area, budget in BUDGETS.items():
        texts = [p.read_text(encoding="utf-8") for p in sorted((root / area).rglob("*.py"))]
        lines = sum(len(text.splitlines()) for text in texts)
        code = sum(code_lines(text) for text in texts)
        cut = max(0, code - budget * code // lines)
        print(f"{area:<16} {lines:>7,} {code:>7,} {budget:>7,}  {cut:,} of {code:,} ({100 * cut / code:.0f} %)")


if __name__ == "__main__":
    main()
