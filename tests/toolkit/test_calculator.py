"""The calculator tool's arithmetic: plain arithmetic only, bounded, never eval."""

import pytest

from toolkit.calculator import CalculatorError, calculate


@pytest.mark.parametrize(
    ("expression", "value"),
    [("2 + 3 * 4", "14"), ("(2 + 3) * 4", "20"), ("6 / 3", "2"), ("7 / 2", "3.5"), ("-2 ** 2", "-4"),
     ("7 // 2", "3"), ("7 % 4", "3"), ("sqrt(16) + abs(-1)", "5"), ("max(1, 9, 3)", "9"), ("round(pi, 2)", "3.14")],
)
def test_calculator_evaluates_arithmetic(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('true')", "open('/etc/passwd')", "(1).__class__", "'a' * 3", "[1, 2]", "x + 1",
     "lambda: 1", "9 ** 9 ** 9", "10 ** 400", "1 / 0", "", "2 +", "True + 1", "sqrt(-1)"],
)
def test_calculator_refuses_anything_but_bounded_arithmetic(expression):
    with pytest.raises(CalculatorError):
        calculate(expression)


def test_calculator_refuses_overlong_expressions():
    with pytest.raises(CalculatorError, match="longer than"):
        calculate("1+" * 600 + "1")
