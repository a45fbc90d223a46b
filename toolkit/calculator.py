"""Safe arithmetic for the `calculator` tool: Python's `ast`, a whitelist, never `eval`.

Accepted: numbers, `+ - * / // % **`, unary `+ -`, parentheses, and the functions `abs`,
`round`, `min`, `max`, `sqrt`, `log`, `log10`, `exp`, `sin`, `cos`, `tan`, `floor`, `ceil` with
the constants `pi` and `e`. Anything else (names, attributes, calls of other functions,
strings, comprehensions) is refused. Exponents and results are bounded so no expression can
exhaust memory or time.
"""

from __future__ import annotations

import ast
import math
import operator

from toolkit.invoke import ToolError

MAX_EXPRESSION_CHARS = 1000
MAX_EXPONENT = 10_000
MAX_MAGNITUDE = 10**300

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


class CalculatorError(ToolError, ValueError):
    """The expression is not plain arithmetic, or its value is out of bounds (a `ToolError`: the model reads why)."""


def _check(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalculatorError("only numbers are allowed")
    if isinstance(value, int) and abs(value) > MAX_MAGNITUDE:
        raise CalculatorError("the result is too large")
    return value


def _eval(node: ast.AST):
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        return _check(node.value)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > MAX_EXPONENT or (abs(left) > 1 and abs(right) * math.log10(abs(left)) > 300)):
            raise CalculatorError("the exponent is too large")
        return _check(_BINARY[type(node.op)](left, right))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
        and len(node.args) <= 8
    ):
        return _check(_FUNCTIONS[node.func.id](*[_eval(arg) for arg in node.args]))
    raise CalculatorError(f"'{type(node).__name__}' is not allowed in an arithmetic expression")


def calculate(expression: str) -> str:
    """Return the value of arithmetic `expression` as text, e.g. `"2 + 3 * 4"` → `"14"`.

    Raises `CalculatorError` for anything that is not plain arithmetic, for division by zero
    and for values out of bounds. Whole floats are shown without `.0` (`"6 / 3"` → `"2"`).
    """
    expression = (expression or "").strip()
    if not expression:
        raise CalculatorError("an expression is required")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc.msg}") from exc
    try:
        value = _eval(tree)
    except ZeroDivisionError as exc:
        raise CalculatorError("division by zero") from exc
    except (OverflowError, ValueError, TypeError) as exc:
        if isinstance(exc, CalculatorError):
            raise
        raise CalculatorError(str(exc)) from exc
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)
