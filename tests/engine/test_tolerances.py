"""Every float tolerance in the tests says why it holds.

A tolerance chosen on one CPU is luck, not a test: it fails on another CPU's rounding (as
``atol=1e-4`` did on an Intel Xeon for importances that a shallow objective leaves free to
~1e-4). So a float comparison with an explicit tolerance must carry its reason.

**The convention.** A *float comparison with an explicit tolerance* is

- a call of ``assert_allclose``, ``allclose``, ``isclose``, ``assert_close``,
  ``assert_array_almost_equal``, ``assert_almost_equal`` or ``approx`` given a tolerance
  (``atol``, ``rtol``, ``abs``, ``rel``, ``decimal``), or
- a comparison ``<``/``<=`` (or ``>``/``>=``) of an expression holding ``abs(...)``
  (``np.abs``, ``torch.abs``, ``.abs()``) with a float literal: ``abs(a - b) < 1e-6``.

Its statement needs a *reason comment*: a comment containing ``tol:`` or one of the words
``exact``, ``rounding``, ``float16``/``float32``/``float64``, ``solver``, ``tolerance`` or
``sampling``, found

- on one of the statement's own lines, or in the comment lines just above it;
- or, for a statement that directly follows another such statement with a reason (a
  group of comparisons), that reason;
- or, for the first statement of a block (``for``, ``with``, ``if``, a function), on the
  block's header line or just above it.

Comparisons with the default tolerances (``assert_allclose(a, b)``: ``rtol=1e-7``;
``pytest.approx(x)``: ``rel=1e-6``) are float64 rounding and need no comment. The check
reads the files with :mod:`ast` and :mod:`tokenize`, so strings and comments never count
as code.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

TOLERANCE_FUNCS = {
    "assert_allclose",
    "allclose",
    "isclose",
    "assert_close",
    "assert_array_almost_equal",
    "assert_almost_equal",
    "approx",
}
TOLERANCE_KEYWORDS = {"atol", "rtol", "abs", "rel", "decimal"}
REASON = re.compile(r"tol:|\bexact|\brounding|\bfloat(16|32|64)\b|\bsolver|\btolerance|\bsampling", re.IGNORECASE)


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _has_abs(node: ast.expr) -> bool:
    return any(isinstance(n, ast.Call) and _name(n.func) == "abs" for n in ast.walk(node))


def _float_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, float)


def is_tolerance_comparison(node: ast.AST) -> bool:
    """Whether ``node`` compares floats with an explicit tolerance (see the module docstring).

    Example:
        >>> is_tolerance_comparison(ast.parse("np.allclose(a, b, atol=1e-6)").body[0].value)
        True
        >>> is_tolerance_comparison(ast.parse("np.allclose(a, b)").body[0].value)
        False
    """
    if isinstance(node, ast.Call) and _name(node.func) in TOLERANCE_FUNCS:
        positional = _name(node.func) in {"assert_array_almost_equal", "assert_almost_equal"} and len(node.args) > 2
        return positional or any(k.arg in TOLERANCE_KEYWORDS for k in node.keywords)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right, op = node.left, node.comparators[0], node.ops[0]
        if isinstance(op, (ast.Lt, ast.LtE)):
            return _has_abs(left) and _float_literal(right)
        if isinstance(op, (ast.Gt, ast.GtE)):
            return _has_abs(right) and _float_literal(left)
    return False


def _comments(source: str) -> dict[int, str]:
    found: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = found.get(tok.start[0], "") + tok.string
    return found


def _comment_only_lines(source: str, comments: dict[int, str]) -> set[int]:
    lines = source.splitlines()
    return {n for n in comments if lines[n - 1].lstrip().startswith("#")}


def unexplained(source: str) -> list[tuple[int, str]]:
    """(line, code) of every float comparison with an explicit tolerance and no reason.

    Example:
        >>> unexplained("np.testing.assert_allclose(a, b, atol=1e-4)\\n")
        [(1, 'np.testing.assert_allclose(a, b, atol=1e-4)')]
        >>> unexplained("# tol: float32 sums\\nnp.testing.assert_allclose(a, b, atol=1e-4)\\n")
        []
    """
    tree = ast.parse(source)
    comments = _comments(source)
    comment_lines = _comment_only_lines(source, comments)
    lines = source.splitlines()

    def reason_above(line: int) -> bool:
        """A reason in the run of comment-only lines ending just above ``line``."""
        n = line - 1
        while n in comment_lines:
            if REASON.search(comments[n]):
                return True
            n -= 1
        return False

    def reason_on(first: int, last: int) -> bool:
        return any(REASON.search(comments.get(n, "")) for n in range(first, last + 1))

    bad: list[tuple[int, str]] = []
    reasoned: dict[int, bool] = {}  # id(stmt) -> covered by a reason (for the group rule)

    def visit_body(body: list[ast.stmt], header: tuple[int, int] | None, header_reason: bool) -> None:
        previous: ast.stmt | None = None
        for i, stmt in enumerate(body):
            children = [
                getattr(stmt, f) for f in ("body", "orelse", "finalbody") if isinstance(getattr(stmt, f, None), list)
            ]
            handlers = getattr(stmt, "handlers", [])
            own = [
                n
                for n in ast.walk(stmt)
                if is_tolerance_comparison(n) and not _inside_child_body(n, children, handlers)
            ]
            header_end = (children[0][0].lineno - 1) if children and children[0] else stmt.end_lineno
            ok = (
                reason_on(stmt.lineno, header_end)
                or reason_above(stmt.lineno)
                or (i == 0 and header_reason)
                or (
                    previous is not None
                    and reasoned.get(id(previous), False)
                    and previous.end_lineno is not None
                    and previous.end_lineno + 1 == stmt.lineno
                )
            )
            if own:
                reasoned[id(stmt)] = ok
                if not ok:
                    bad.append((stmt.lineno, lines[stmt.lineno - 1].strip()))
            for child in children:
                visit_body(child, (stmt.lineno, header_end), ok)
            for handler in handlers:
                visit_body(handler.body, (handler.lineno, handler.lineno), ok)
            previous = stmt

    visit_body(tree.body, None, False)
    return bad


def _inside_child_body(node: ast.AST, children: list[list[ast.stmt]], handlers: list) -> bool:
    """Whether ``node`` lies in a nested block (judged with that block's own statements)."""
    line = getattr(node, "lineno", None)
    if line is None:
        return False
    blocks = [*children, *(h.body for h in handlers)]
    return any(b and b[0].lineno <= line <= (b[-1].end_lineno or b[-1].lineno) for b in blocks)


def test_the_check_flags_a_tolerance_without_a_reason():
    bad = textwrap.dedent(
        """
        import numpy as np, pytest

        def test_x(a, b):
            np.testing.assert_allclose(a, b, atol=1e-4)
            assert a == pytest.approx(b, abs=1e-6)
            assert abs(a - b) < 1e-5
            assert np.abs(a - b).max() <= 2e-3
            # a comment that gives no reason
            np.testing.assert_array_almost_equal(a, b, 5)
        """
    )
    assert [line for line, _ in unexplained(bad)] == [5, 6, 7, 8, 10]


def test_the_check_accepts_reasons_and_default_tolerances():
    good = textwrap.dedent(
        """
        import numpy as np, pytest

        def test_x(a, b):
            np.testing.assert_allclose(a, b)  # default rtol: float64 rounding
            assert a == pytest.approx(b)
            np.testing.assert_allclose(a, b, atol=1e-4)  # tol: the solver's gradient stop
            # tol: float32 sums over 64 terms
            # (a second comment line)
            assert abs(a - b) < 1e-5
            assert abs(a + b) < 1e-5
            for x in a:  # exact: the same computation
                assert x == pytest.approx(b, abs=0)
            s = "assert abs(a - b) < 1e-5"
            assert abs(len(a) - 3) < 4
        """
    )
    assert unexplained(good) == []


def test_a_statement_after_a_gap_needs_its_own_reason():
    source = textwrap.dedent(
        """
        def test_x(a, b):
            # tol: float32
            assert abs(a - b) < 1e-5

            assert abs(a - b) < 1e-5
        """
    )
    assert [line for line, _ in unexplained(source)] == [6]


def test_every_tolerance_in_the_tests_states_its_reason():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for line, code in unexplained(path.read_text(encoding="utf-8")):
            found.append(f"{path.relative_to(TESTS)}:{line}: {code}")
    assert not found, (
        f"{len(found)} float comparisons with a tolerance give no reason (tests/engine/test_tolerances.py says "
        "how: a comment with 'tol:' or exact/rounding/float32/solver/tolerance/sampling):\n" + "\n".join(found)
    )
