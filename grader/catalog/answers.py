"""The answer engine: read what a learner wrote in `answers.toml` and grade it against a key.

Pure functions over data: no I/O, no torch, nothing that can hang or blow up on hostile text.

    parse_answer(raw)            -> Number | NumberArray | ParseError
    parse_choice(raw, letters)   -> str | ParseError
    check_answer(question, raw)  -> AnswerResult        (never raises)
    check_answers(questions, table) -> list[AnswerResult]

What a learner may write (SPEC "Quiz exercises"), as a TOML value or inside a TOML string:

- TOML integers and floats (`4194304`, `4_194_304`, `88.7`, `8.0e1`, `inf`).
- Plain numbers in strings: `"4194304"`, `"-0.5"`, `".5"`, `"4.19e6"`.
- Thousands separators in strings: comma, space or underscore, one kind per number, and only
  between groups of exactly three digits: `"4,194,304"`, `"4 194 304"`, `"4_194_304"`.
  `"1,5"` is refused as ambiguous (a European decimal comma?). Note that `"1,500"` therefore
  reads as 1500. Inside an expression, commas group thousands only in a function's arguments
  (`"ln(50,257)"`, as the questions write V = 50,257), by this rule: a comma between digits with
  exactly three digits after it and no space is a thousands separator; a comma followed by a
  space separates arguments. So `"log(2, 8)"` is log base 8 of 2, `"log(8,2)"` log base 2 of 8
  (no group of three), and `"log(50,257)"` is ln(50257); a wrong answer shows how it was read.
  Inside a list's brackets or plain parentheses a comma always separates elements.
- A trailing unit word from a closed list (`"4,198,400 parameters"`, `"4.6 nats"`, bytes,
  tokens, ...) is dropped; other words (`"10 million"`, `"2 pi"`) are not guessed at.
- Any Unicode compatibility form, normalised with NFKC first: full-width digits and commas
  (`"４，１９４，３０４"`), no-break and thin spaces, full-width letters. Also `−` (minus sign)
  and `–` are `-`, `×` is `*`, `÷` is `/`, `π` is `pi`, superscript digits are powers
  (`"10³"`), and zero-width characters are dropped.
  Other number-like symbols (`½`, `①`) are refused rather than guessed at.
- Infinity: `inf`, `+inf`, `-inf`, `Infinity`, `∞`, `+∞`, `-∞` (any case). `nan` is refused.
- A simple expression, evaluated by walking Python's `ast`, never `eval`: numbers, `+ - * /`,
  `**` and `^` (both mean power, as on a calculator; `^` is never XOR), parentheses, unary
  minus, the constants `pi` and `e`, and the functions `ln(x)`, `log(x)` (natural log, as in
  Python, NumPy and PyTorch), `log(x, b)` (log base b, as Python's `math.log`), `log2`,
  `log10`, `exp` and `sqrt`. Names are case-insensitive. Anything else (other names,
  attributes, subscripts, other calls, `%`, `//`, comparisons, lambdas) is refused.
  Arithmetic is exact (fractions) until a function or constant makes it a float, so
  `"768/12"` is exactly 64 and `"sqrt(4096)"` is exactly 64.
- A list as a TOML array, nested for a matrix (a list of rows). Each element may be any of the
  forms above. A string holding a bracketed list, `"[[1, 0], [0.0558, 0.9442]]"`, is also
  accepted; inside it commas separate elements and each element is an expression (so
  `"[4,194,304]"` is a list of three numbers). Also as Python, NumPy and PyTorch print them:
  a tuple `"(2, 3, 5, 4)"`, `"torch.Size([2, 5, 12])"`, `"tensor([...])"`, `"array([...])"`,
  and NumPy's space-separated `"[0.0474 0.9526]"` (nested, over several lines too; only when
  every element is a plain number). Where the question expects a list, a shape may be written
  `"2x3x5x5"`, `"2 x 3"` or `"2×3"` (elsewhere `×` is multiplication).

Limits (against CPU and memory bombs): 200 characters a string (before and after NFKC), 10,000
elements and 4 dimensions a list, decimal exponents within +-400, magnitudes up to the largest
finite float, and exact intermediate values of at most 4096 bits (a larger power is computed as
a float, and overflow is refused): `"9**9**9"` is refused at once.

Grading rules:
- integer: exact. A value that is exactly an integer counts as that integer (`80.0`, `"8.0e1"`,
  `"768/12"`); a wrong answer written as a rounded decimal or in scientific notation is told to
  write all its digits.
- real: |answer - key| <= tol (absolute, the default), <= tol * |key| (relative), or, for
  `sigfigs = n`, within half a unit of the key's n-th significant figure. Bounds are inclusive
  and computed exactly when both values are exact (a TOML float is read as its shortest repr).
- inf: `inf` and its spellings above; a finite number gets teaching text about overflow.
- choice: one letter, either case (full-width too), surrounding spaces ignored, also as the
  starter prints options: `"B)"`, `"(B)"`, `"B."`, `"B:"`, optionally followed by the option's
  text (`"B) 64"`; case, spacing and digit grouping aside, or the start of a long text). A text
  that is another option's or none (`"B) 96"`) is a form error saying so: we never pick one of
  the two. Anything else is a form error that lists the valid letters.
- An answer in no form we read is told what the question expects (one whole number, a list of
  4 whole numbers, a 2×2 matrix) and how to write that.
- Lists compare element by element; feedback names the element (row and column in a matrix)
  and the shape, never the key's values.
"""

from __future__ import annotations

import ast
import math
import re
import sys
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SkipValidation,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    model_validator,
)

from grader.limits import ANSWER_CHARS as MAX_CHARS
from grader.limits import ANSWER_DECIMAL_EXPONENT as MAX_DECIMAL_EXPONENT
from grader.limits import ANSWER_DIMS as MAX_DIMS
from grader.limits import ANSWER_ELEMENTS as MAX_ELEMENTS
from grader.limits import ANSWER_EXACT_BITS as MAX_EXACT_BITS
from grader.limits import ANSWER_SHOWN_CHARS as _SHOWN_CHARS
from grader.locale import N_, Message, join, msg

# -- limits ------------------------------------------------------------------------------------

# MAX_CHARS, MAX_ELEMENTS, MAX_DIMS, MAX_DECIMAL_EXPONENT, MAX_EXACT_BITS and _SHOWN_CHARS are
# imported above from grader.limits, the table of every cap
MAX_MAGNITUDE = Fraction(sys.float_info.max)

Notation = Literal["integer", "decimal", "scientific", "expression", "infinity"]


# -- parsed values -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Number:
    """One number as the learner wrote it.

    value: a Fraction when exact (every literal, and + - * / ** on them); a float when a
    function or constant made it inexact, or for +-inf.
    text: what the learner wrote (stripped), for feedback.
    notation: how it was written; "decimal" and "scientific" are rounded-looking forms.
    """

    value: Fraction | float
    text: str
    notation: Notation

    @property
    def is_exact(self) -> bool:
        return isinstance(self.value, Fraction)

    @property
    def is_finite(self) -> bool:
        return self.is_exact or math.isfinite(self.value)

    @property
    def is_integer(self) -> bool:
        if isinstance(self.value, Fraction):
            return self.value.denominator == 1
        return math.isfinite(self.value) and self.value.is_integer()

    @property
    def shape(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class NumberArray:
    """A list (or matrix, or deeper array) of numbers: `values` in row-major order."""

    values: tuple[Number, ...]
    shape: tuple[int, ...]


@dataclass(frozen=True)
class ParseError:
    """Why an answer could not be read. `message` is learner-facing; `code` is stable."""

    message: str
    code: str
    # the answer is not in any form we read (rather than a form we read with a bad value): the
    # question can then say what it expects instead of listing the forms of a number
    unrecognised: bool = False


ParsedAnswer = Number | NumberArray


class _Refused(Exception):
    """Internal: raised while reading, turned into a ParseError at the boundary."""

    def __init__(self, code: str, message: str, unrecognised: bool = False):
        super().__init__(message)
        self.code = code
        self.message = message
        self.unrecognised = unrecognised


def _show(text: str) -> str:
    """Learner text quoted back: non-printables escaped, cut to a few dozen characters."""
    safe = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return safe if len(safe) <= _SHOWN_CHARS else safe[: _SHOWN_CHARS - 1] + "…"


_FORMS_HELP = msg(
    "write a number (1234567, 1,234,567, 0.125, 1.5e-3) or a simple expression (3/4, sqrt(2), ln(10), 2**10)"
)


# -- text normalisation ------------------------------------------------------------------------

_SUPERSCRIPT_RUN = re.compile("[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
_SYMBOLS = str.maketrans({"−": "-", "–": "-", "×": "*", "÷": "/", "π": "pi", "^": "**"})


def _normalise(raw: str) -> str:
    """Superscripts to powers, NFKC, symbols to ASCII operators, stripped. Raises _Refused."""
    text = _SUPERSCRIPT_RUN.sub(lambda m: "**(" + m.group().translate(_SUPERSCRIPTS) + ")", raw)
    for c in text:
        if unicodedata.category(c) == "No":
            raise _Refused(
                "unreadable",
                msg(
                    "{text} contains {char}: write it with digits and operators (e.g. 1/2 rather than ½)",
                    text=repr(_show(raw)),
                    char=repr(c),
                ),
            )
    text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_SYMBOLS)
    return text.strip()


# -- plain numbers -----------------------------------------------------------------------------

_PLAIN = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_GROUPED = re.compile(
    r"(?P<sign>[+-]?)(?P<int>\d{1,3}(?P<sep>[,_ ])\d{3}(?:(?P=sep)\d{3})*)"
    r"(?P<frac>\.\d*)?(?P<exp>[eE][+-]?\d+)?",
    re.ASCII,
)
_SEPARATED = re.compile(r"[+-]?\d[\d,_ ]*(?:\.\d*)?(?:[eE][+-]?\d+)?", re.ASCII)
_INFINITY = re.compile(r"(?P<sign>[+-]?)\s*(?:inf|infinity|∞)", re.IGNORECASE)
_NAN = re.compile(r"[+-]?nan", re.IGNORECASE)


def _notation_of_literal(literal: str) -> Notation:
    if "e" in literal or "E" in literal:
        return "scientific"
    return "decimal" if "." in literal else "integer"


def _exact_decimal(literal: str) -> Fraction | float:
    """An ASCII decimal literal (underscores allowed) as an exact Fraction, within limits (a float when
    it is too long to compute with exactly, as _checked makes it)."""
    literal = literal.replace("_", "")
    _, _, exponent = literal.lower().partition("e")
    if exponent and abs(int(exponent)) > MAX_DECIMAL_EXPONENT:
        raise _Refused(
            "too-large",
            msg(
                "the exponent in {literal} is out of range (at most {limit} either way)",
                literal=_show(literal),
                limit=MAX_DECIMAL_EXPONENT,
            ),
        )
    return _checked(Fraction(literal))


def _read_plain(text: str) -> Number | None:
    """A plain or thousands-grouped number, or infinity; None when `text` is neither."""
    if m := _INFINITY.fullmatch(text):
        return Number(-math.inf if m["sign"] == "-" else math.inf, text, "infinity")
    if _PLAIN.fullmatch(text):
        return Number(_exact_decimal(text), text, _notation_of_literal(text))
    if m := _GROUPED.fullmatch(text):
        literal = m["sign"] + m["int"].replace(m["sep"], "") + (m["frac"] or "") + (m["exp"] or "")
        return Number(_exact_decimal(literal), text, _notation_of_literal(literal))
    return None


def _refuse_separators(text: str) -> None:
    """Explain why digits with separators that are not groups of three were not read."""
    if "," in text:
        raise _Refused(
            "ambiguous-comma",
            msg(
                "{text} is ambiguous: write decimals with a point (1.5), and use commas "
                "only between groups of three digits (1,234,567)",
                text=repr(_show(text)),
            ),
        )
    raise _Refused(
        "bad-grouping",
        msg(
            "{text} has digit groups that are not three digits long: separate thousands "
            "as 1 234 567 or 1_234_567, or write the digits without separators",
            text=repr(_show(text)),
        ),
    )


# -- expressions -------------------------------------------------------------------------------


def _checked(value: Fraction | float) -> Fraction | float:
    """Keep values finite and small enough to compute with; huge exact values become floats."""
    if isinstance(value, Fraction):
        if abs(value) > MAX_MAGNITUDE:
            raise _Refused("too-large", msg("the value is too large to be an answer"))
        if max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_EXACT_BITS:
            return float(value)
        return value
    if isinstance(value, complex) or not math.isfinite(value):
        raise _Refused("too-large", msg("the value is too large to be an answer"))
    return value


def _ln(x: Fraction | float) -> float:
    if x <= 0:
        raise _Refused("math-domain", msg("the logarithm needs a positive number"))
    return math.log(x)


def _log(x: Fraction | float, base: Fraction | float | None = None) -> float:
    if base is None:
        return _ln(x)
    if base <= 0 or base == 1:
        raise _Refused("math-domain", msg("the base b of log(x, b) must be positive and not 1"))
    return _ln(x) / math.log(base)


def _log2(x: Fraction | float) -> float:
    _ln(x)  # the same domain check
    return math.log2(x)


def _log10(x: Fraction | float) -> float:
    _ln(x)
    return math.log10(x)


def _exp(x: Fraction | float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        raise _Refused(
            "too-large", msg("the value overflows in exp(...): it is too large to be an answer")
        ) from None


def _sqrt(x: Fraction | float) -> Fraction | float:
    if x < 0:
        raise _Refused("math-domain", msg("the square root needs a number that is not negative"))
    if isinstance(x, Fraction):
        num, den = math.isqrt(x.numerator), math.isqrt(x.denominator)
        if num * num == x.numerator and den * den == x.denominator:
            return Fraction(num, den)
    return math.sqrt(x)


_FUNCTIONS: dict[str, tuple[Callable[..., Fraction | float], tuple[int, ...]]] = {
    "ln": (_ln, (1,)),
    "log": (_log, (1, 2)),
    "log2": (_log2, (1,)),
    "log10": (_log10, (1,)),
    "exp": (_exp, (1,)),
    "sqrt": (_sqrt, (1,)),
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}
_ALLOWED_HELP = msg(
    "only numbers, + - * / ** ^, parentheses, pi, e and the functions "
    "ln, log, log2, log10, exp, sqrt are allowed"
)


def _power(base: Fraction | float, exponent: Fraction | float) -> Fraction | float:
    if base == 0 and exponent < 0:
        raise _Refused("division-by-zero", msg("division by zero (0 to a negative power)"))
    if isinstance(base, Fraction) and isinstance(exponent, Fraction) and exponent.denominator == 1:
        bits = max(base.numerator.bit_length(), base.denominator.bit_length())
        if abs(exponent.numerator) * bits <= MAX_EXACT_BITS:
            return base**exponent.numerator
    if base < 0 and not float(exponent).is_integer():
        raise _Refused("math-domain", msg("a negative number to a fractional power is not a real number"))
    try:
        return math.pow(base, exponent)
    except OverflowError:
        raise _Refused("too-large", msg("the power is too large to be an answer")) from None


def _binary(op: ast.operator, left: Fraction | float, right: Fraction | float) -> Fraction | float:
    match op:
        case ast.Add():
            return left + right
        case ast.Sub():
            return left - right
        case ast.Mult():
            return left * right
        case ast.Div():
            if right == 0:
                raise _Refused("division-by-zero", msg("division by zero"))
            return left / right
        case ast.Pow():
            return _power(left, right)
    raise _Refused(
        "unsafe-expression",
        msg(
            "the operator {operator} is not allowed: {allowed}",
            operator=type(op).__name__,
            allowed=_ALLOWED_HELP,
        ),
    )


def _evaluate(node: ast.AST, source: str) -> Fraction | float:
    """Walk an expression tree, allowing only arithmetic, pi, e and a few functions."""
    match node:
        case ast.Constant(value=int() as value) if not isinstance(value, bool):
            return _checked(Fraction(value))
        case ast.Constant(value=float()):
            return _exact_decimal(ast.get_source_segment(source, node) or "nan")
        case ast.Constant():  # True, strings, bytes, complex numbers, None, ...
            segment = ast.get_source_segment(source, node) or ''
            raise _Refused(
                "unsafe-expression",
                msg("{text} is not a number: {allowed}", text=repr(_show(segment)), allowed=_ALLOWED_HELP),
            )
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_evaluate(operand, source)
        case ast.UnaryOp(op=ast.UAdd(), operand=operand):
            return _evaluate(operand, source)
        case ast.BinOp(left=left, op=op, right=right):
            a, b = _evaluate(left, source), _evaluate(right, source)
            try:
                return _checked(_binary(op, a, b))
            except (ArithmeticError, ValueError):
                raise _Refused("too-large", msg("the value is out of range")) from None
        case ast.Name(id=name) if name.lower() in _CONSTANTS:
            return _CONSTANTS[name.lower()]
        case ast.Name(id=name):
            raise _Refused(
                "unsafe-expression",
                msg("unknown name {name}: {allowed}", name=repr(_show(name)), allowed=_ALLOWED_HELP),
            )
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name.lower() in _FUNCTIONS:
            function, arities = _FUNCTIONS[name.lower()]
            if len(args) not in arities or any(isinstance(a, ast.Starred) for a in args):
                if len(arities) == 1:
                    segment = ast.get_source_segment(source, node) or ""
                    if re.search(r"\d, \d{3}(?!\d)", segment):  # ln(50, 257): thousands, spaced?
                        raise _Refused(
                            "unsafe-expression",
                            msg(
                                "the function {name} takes one argument: to group thousands inside it, "
                                "write the comma without a space, {name}(50,257), or no comma, {name}(50257)",
                                name=name.lower(),
                            ),
                        )
                    raise _Refused(
                        "unsafe-expression",
                        msg("the function {name} takes {n} argument(s)", name=name.lower(), n=arities[0]),
                    )
                raise _Refused(
                    "unsafe-expression",
                    msg(
                        "the function {name} takes {a} or {b} argument(s)",
                        name=name.lower(),
                        a=arities[0],
                        b=arities[1],
                    ),
                )
            values = [_evaluate(a, source) for a in args]
            try:
                return _checked(function(*values))
            except (ArithmeticError, ValueError):  # e.g. ln of a value that rounds to 0.0
                raise _Refused(
                    "math-domain", msg("the value of {name}(...) is out of range", name=name.lower())
                ) from None
        case ast.Call():
            raise _Refused(
                "unsafe-expression",
                msg("that function call is not allowed: {allowed}", allowed=_ALLOWED_HELP),
            )
        case ast.Tuple():
            raise _Refused(
                "ambiguous-comma",
                msg(
                    "a comma here is ambiguous: write decimals with a point (1.5), and a list "
                    "in brackets of its own, [a, b]"
                ),
            )
    raise _Refused(  # "half and half", "1 < 2": no arithmetic of ours, so say what is expected
        "unsafe-expression",
        msg("{node} is not allowed: {allowed}", node=type(node).__name__, allowed=_ALLOWED_HELP),
        unrecognised=True,
    )


def _parse_expression(text: str) -> ast.expr:
    try:
        return ast.parse(text, mode="eval").body
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError
        if "," in text:
            raise _Refused(
                "ambiguous-comma",
                msg(
                    "could not read {text}: a comma groups thousands (1,234,567, ln(50,257)), "
                    "separates the elements of a list ([a, b]) or the arguments of log(x, b)",
                    text=repr(_show(text)),
                ),
            ) from None
        if "%" in text:
            raise _Refused(
                "unreadable",
                msg(
                    "could not read {text}: percent signs are not read; write the value as a plain number",
                    text=repr(_show(text)),
                ),
            ) from None
        raise _Refused(
            "unreadable",
            msg("could not read {text} as a number: {forms}", text=repr(_show(text)), forms=_FORMS_HELP),
            unrecognised=True,
        ) from None


def _number_from_node(node: ast.expr, source: str) -> Number:
    text = ast.get_source_segment(source, node) or source
    value = _evaluate(node, source)
    literal = node.operand if isinstance(node, ast.UnaryOp) else node
    if isinstance(literal, ast.Constant) and isinstance(value, Fraction):
        return Number(value, text, _notation_of_literal(text))
    return Number(value, text, "expression")


# -- reading an answer -------------------------------------------------------------------------


# -- notations learners copy from Python, NumPy and PyTorch -----------------------------------

# a trailing unit word, dropped: "4,198,400 parameters", "4.6 nats". A closed list, so "2 pi" or
# "10 million" is never silently read as 2 or 10
_UNIT_WORDS = frozenset(
    ["parameter", "parameters", "param", "params", "weight", "weights", "byte", "bytes", "nat"]
    + ["nats", "bit", "bits", "token", "tokens", "element", "elements", "value", "values", "entries"]
)
_UNIT = re.compile(r"(?P<body>.*?\S)\s+(?P<unit>[A-Za-z]+)\.?", re.ASCII | re.DOTALL)
# how PyTorch and NumPy print a shape or an array: torch.Size([2, 5, 12]), tensor([1, 2]),
# array([0.1, 0.9]) (a trailing dtype=... is dropped)
_WRAPPED = re.compile(
    r"(?:torch\.)?Size\((?P<size>.*)\)|(?:(?:torch|np|numpy)\.)?(?:tensor|array)\((?P<array>\[.*\])"
    r"(?:\s*,\s*dtype\s*=\s*[\w.]+)?\s*\)",
    re.ASCII | re.DOTALL | re.IGNORECASE,
)
# a shape written as 2x3x5x5, 2 x 3 or 2×3 (× is * by now): read so only where a list is expected
_DIMS = re.compile(r"\d+(?:\s*[xX*]\s*\d+)+", re.ASCII)
_DIM_SEPARATOR = re.compile(r"\s*[xX*]\s*", re.ASCII)
# NumPy prints [0.0474 0.9526] and [[1. 0.]\n [0.5 0.5]]: numbers separated by spaces only
_NUMPY_ATOM = re.compile(r"\[|\]|[^\s\[\]]+")
_NUMPY_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?inf", re.ASCII)
# thousands inside a function's arguments: ln(50,257). A comma between digits with exactly three
# digits after it and no space is a thousands separator there; a space after the comma makes it
# the argument separator of log(x, b): log(2, 8), and log(8,2) has no group of three
_GROUPED_ARGUMENT = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?![\w.]|,\d)", re.ASCII)


def _without_unit(text: str) -> str:
    if (m := _UNIT.fullmatch(text)) and m["unit"].lower() in _UNIT_WORDS:
        return m["body"]
    return text


def _unwrapped(text: str) -> str:
    if m := _WRAPPED.fullmatch(text):
        return (m["size"] if m["size"] is not None else m["array"]).strip()
    return text


def _numpy_commas(text: str) -> str:
    """[0.0474 0.9526] -> [0.0474, 0.9526] when every element is a plain number; else unchanged."""
    if not text.startswith("[") or "," in text:
        return text
    atoms = _NUMPY_ATOM.findall(text)
    if not all(a in "[]" or _NUMPY_NUMBER.fullmatch(a) for a in atoms):
        return text
    out: list[str] = []
    for atom in atoms:
        if out and out[-1] != "[" and atom != "]":
            out.append(",")
        out.append(atom)
    return "".join(out)


def _grouped_arguments(text: str) -> str:
    """ln(50,257) -> ln(50257): digit groups inside a function call's parentheses only (inside a
    list's brackets or plain parentheses, commas separate elements: [4,194,304] is three)."""
    if "," not in text or "(" not in text:
        return text
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "(":
            stack.append("call" if out and (out[-1][-1:].isalnum() or out[-1][-1:] == "_") else "group")
        elif c == "[":
            stack.append("list")
        elif c in ")]" and stack:
            stack.pop()
        elif c.isdigit() and stack and stack[-1] == "call" and (m := _GROUPED_ARGUMENT.match(text, i)):
            out.append(m.group().replace(",", ""))  # the pattern's look-behind: a number's start
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _read_text(raw: str, dims: bool = False) -> Number | tuple[list, str]:
    """A string: one number, or (for "[...]", "(...)") a nested list of ast nodes plus the source.
    dims: a list is expected, so 2x3x5 is a shape [2, 3, 5] (elsewhere 2×3 is a product)."""
    if len(raw) > MAX_CHARS:
        raise _Refused(
            "too-long",
            msg("the answer is {n} characters long; the limit is {limit}", n=len(raw), limit=MAX_CHARS),
        )
    text = _normalise(raw)
    if len(text) > MAX_CHARS:
        raise _Refused(
            "too-long", msg("the answer is too long once normalised; the limit is {limit}", limit=MAX_CHARS)
        )
    text = _unwrapped(_without_unit(text))
    if not text:
        raise _Refused("empty", msg("the answer is empty: {forms}", forms=_FORMS_HELP))
    if dims and _DIMS.fullmatch(text):
        text = "[" + ", ".join(_DIM_SEPARATOR.split(text)) + "]"
    text = _grouped_arguments(_numpy_commas(text))
    if _NAN.fullmatch(text):
        raise _Refused("nan", msg("not a number (nan) is not an answer: {forms}", forms=_FORMS_HELP))
    if (number := _read_plain(text)) is not None:
        return Number(number.value, raw.strip(), number.notation)
    if _SEPARATED.fullmatch(text):
        _refuse_separators(raw.strip())
    node = _parse_expression(text)
    if isinstance(node, ast.List) or (isinstance(node, ast.Tuple) and text.startswith("(")):
        return ([_list_nodes(n) for n in node.elts], text)  # a list, or a tuple: (2, 3, 5, 4)
    number = _number_from_node(node, text)
    return Number(number.value, raw.strip(), number.notation)


def _list_nodes(node: ast.expr) -> list | ast.expr:
    return [_list_nodes(n) for n in node.elts] if isinstance(node, (ast.List, ast.Tuple)) else node


def _read_scalar(raw: object) -> Number:
    """One learner value that is not a list."""
    match raw:
        case None:
            raise _Refused("missing", msg("no answer given"))
        case bool():
            raise _Refused(
                "not-a-number",
                msg("{value} is not a number: {forms}", value=str(raw).lower(), forms=_FORMS_HELP),
            )
        case int():
            return Number(_checked(Fraction(raw)), str(raw), "integer")
        case float() if math.isnan(raw):
            raise _Refused("nan", msg("not a number (nan) is not an answer: {forms}", forms=_FORMS_HELP))
        case float() if math.isinf(raw):
            return Number(raw, "inf" if raw > 0 else "-inf", "infinity")
        case float():
            text = repr(raw)
            return Number(_exact_decimal(text), text, "scientific" if "e" in text else "decimal")
        case str():
            read = _read_text(raw)
            if isinstance(read, Number):
                return read
            raise _Refused(
                "not-a-number",
                msg("a list inside a list must be written as a nested TOML array, not as a string"),
            )
        case dict():
            raise _Refused("not-a-number", msg("a TOML table is not an answer: {forms}", forms=_FORMS_HELP))
    raise _Refused(
        "not-a-number", msg("a {type} is not an answer: {forms}", type=type(raw).__name__, forms=_FORMS_HELP)
    )


def _where(path: Sequence[int], ndim: int) -> Message:
    """1-based position of an element: 'element 3', 'row 2, column 1', 'element [1, 2, 3]'."""
    if ndim == 1 and len(path) == 1:
        return msg("element {n}", n=path[0] + 1)
    if ndim == 2 and len(path) == 2:
        return msg("row {row}, column {column}", row=path[0] + 1, column=path[1] + 1)
    if len(path) == 1:
        return msg("row {row}", row=path[0] + 1)
    return msg("element [{path}]", path=", ".join(str(i + 1) for i in path))


def _build_array(items: list, read_leaf: Callable[[Any], Number]) -> NumberArray:
    """Nested lists to a rectangular NumberArray; read_leaf reads each non-list element."""

    def build(node: list, path: tuple[int, ...]) -> tuple[tuple[Number, ...], tuple[int, ...]]:
        if len(path) >= MAX_DIMS:
            raise _Refused("too-large", msg("lists may be nested at most {n} deep", n=MAX_DIMS))
        if not node:
            raise _Refused(
                "empty",
                msg("an empty list is not an answer")
                if not path
                else msg("{where} is an empty list", where=_where(path, len(path) + 1)),
            )
        if len(node) > MAX_ELEMENTS:
            raise _Refused("too-large", msg("the list has more than {n} elements", n=MAX_ELEMENTS))
        children = []
        for i, item in enumerate(node):
            if isinstance(item, (list, tuple)):
                children.append(build(list(item), (*path, i)))
            else:
                try:
                    children.append(((read_leaf(item),), ()))
                except _Refused as refused:
                    depth = len(path) + 1
                    ndim = depth if all(not isinstance(x, (list, tuple)) for x in node) else depth + 1
                    raise _Refused(
                        refused.code,
                        msg("{where}: {message}", where=_where((*path, i), ndim), message=refused.message),
                    ) from None
        shapes = {shape for _, shape in children}
        if len(shapes) > 1:
            if () in shapes:
                raise _Refused(
                    "ragged",
                    msg("the answer mixes numbers and lists: write a list of numbers, or a list of rows"),
                )
            lengths = ", ".join(str(shape[0]) for _, shape in children)
            if not path:
                raise _Refused(
                    "ragged",
                    msg(
                        "the rows have different lengths ({lengths}): every row must have the same length",
                        lengths=lengths,
                    ),
                )
            raise _Refused(
                "ragged",
                msg(
                    "the lists inside {where} have different lengths "
                    "({lengths}): every row must have the same length",
                    where=_where(path, len(path) + 1),
                    lengths=lengths,
                ),
            )
        values = tuple(v for child, _ in children for v in child)
        if len(values) > MAX_ELEMENTS:
            raise _Refused("too-large", msg("the list has more than {n} elements", n=MAX_ELEMENTS))
        return values, (len(node), *shapes.pop())

    values, shape = build(items, ())
    return NumberArray(values, shape)


def parse_answer(raw: object, expected: tuple[int, ...] = ()) -> Number | NumberArray | ParseError:
    """Read a learner's value (a TOML int, float, string, or nested array) into numbers.

    expected: the shape the question asks for; a string like 2x3x5 is read as a shape [2, 3, 5]
    only where a list is expected (elsewhere 2×3 is the product 6).
    Never raises on learner input: anything unreadable comes back as a ParseError whose
    message says why and how to write it.
    """
    try:
        if isinstance(raw, (list, tuple)):
            return _build_array(list(raw), _read_scalar)
        if isinstance(raw, str):
            read = _read_text(raw, dims=len(expected) == 1)
            if isinstance(read, tuple):
                nodes, source = read
                return _build_array(nodes, lambda node: _number_from_node(node, source))
            return read
        return _read_scalar(raw)
    except _Refused as refused:
        message = msg("{message}.", message=refused.message).capitalized()
        return ParseError(message, refused.code, refused.unrecognised)


def parse_choice(raw: object, letters: Iterable[str]) -> str | ParseError:
    """A multiple-choice answer: one of `letters`, either case, spaces around it ignored, or
    written as options are printed ("B)", "(B)", "B) 64"; check_answer compares the text)."""
    valid = sorted(letter.upper() for letter in letters)
    listed = _or_list(valid)
    if raw is None:
        return ParseError(
            msg("No answer given: answer with one letter, {letters}.", letters=listed), "missing"
        )
    if not isinstance(raw, str):
        return ParseError(
            msg(
                'Answer with the letter of one option ({letters}), written as a TOML string such as "A".',
                letters=listed,
            ),
            "not-a-letter",
        )
    if len(raw) > MAX_CHARS:
        return ParseError(
            msg("The answer is too long: answer with one letter, {letters}.", letters=listed), "too-long"
        )
    read = _letter_and_text(raw, valid)
    if read is not None:
        return read[0]
    return ParseError(
        msg(
            "{text} is not one of the options: answer with one letter, {letters}.",
            text=repr(_show(raw.strip())),
            letters=listed,
        ),
        "not-a-letter",
    )


# a letter as the starter prints options ("A) 32"): B), (B), B. or B:, with the option's text
# after it or not ("B) 64"). A letter and a word with only a space between ("a lot") is not one
_CHOICE = re.compile(r"(?:\((?P<enclosed>[A-Za-z])\)|(?P<marked>[A-Za-z])\s*[).:])\s*(?P<text>.*)", re.DOTALL)


def _letter_and_text(raw: str, valid: Sequence[str]) -> tuple[str, str] | None:
    """(letter, the text written after it) for a choice in one of _CHOICE's forms, else None."""
    text = unicodedata.normalize("NFKC", raw).translate(_INVISIBLE).strip()
    if text.upper() in valid:
        return text.upper(), ""
    if (m := _CHOICE.fullmatch(text)) is None:
        return None
    letter = (m["enclosed"] or m["marked"]).upper()
    return (letter, m["text"].strip()) if letter in valid else None


def _same_option_text(written: str, option: str) -> bool:
    """Is `written` this option's text (or the start of a long one)? Case, spaces and digit
    grouping aside: "64", "2359296" for "2,359,296", "softmax is unchanged" for the long B."""

    def plain(text: str) -> str:
        return " ".join(unicodedata.normalize("NFKC", text).casefold().split()).rstrip(".")

    said, meant = plain(written), plain(option)
    if said == meant or (len(said) >= 12 and meant.startswith(said)):
        return True
    a, b = parse_answer(written), parse_answer(option)
    return isinstance(a, Number) and isinstance(b, Number) and a.value == b.value


def _or_list(items: Sequence[str], word: str = "or") -> str:
    if len(items) == 1:
        return items[0]
    if word == "and":
        return msg("{head} and {last}", head=", ".join(items[:-1]), last=items[-1])
    return msg("{head} or {last}", head=", ".join(items[:-1]), last=items[-1])


# -- questions ---------------------------------------------------------------------------------

_RealScalar = StrictInt | StrictFloat | StrictStr


class _QuestionBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    hint: str | None = None  # teaching text added to the feedback on a wrong (readable) answer

    _key: Number | NumberArray | None = PrivateAttr(default=None)

    @property
    def key(self) -> Number | NumberArray:
        """The answer key, read with the same parser as learner answers."""
        assert self._key is not None
        return self._key

    def _set_key(self, raw: object, integer: bool) -> None:
        key = parse_answer(raw)
        if isinstance(key, ParseError):
            raise ValueError(f"{self.id}: the key cannot be read: {key.message}")
        values = key.values if isinstance(key, NumberArray) else (key,)
        if not all(v.is_finite for v in values):
            raise ValueError(f"{self.id}: the key must be finite (use kind = 'inf' for inf)")
        if integer and not all(v.is_integer for v in values):
            raise ValueError(f"{self.id}: an integer key must hold whole numbers")
        self._key = key


class IntegerQuestion(_QuestionBase):
    """An exact integer, or a list / matrix of them (`answer = [1, 3, 6]`)."""

    kind: Literal["integer"] = "integer"
    answer: StrictInt | list[StrictInt] | list[list[StrictInt]]

    @model_validator(mode="after")
    def _read_key(self) -> IntegerQuestion:
        self._set_key(self.answer, integer=True)
        return self


class RealQuestion(_QuestionBase):
    """A real number, or a list / matrix of them, within a tolerance.

    tol_kind "abs" (default): |x - key| <= tol.  "rel": |x - key| <= tol * |key|.
    "sigfigs": x agrees with key to `sigfigs` significant figures, i.e. |x - key| is at most
    half a unit in the key's sigfigs-th significant figure (a key of 0 needs exactly 0).
    The key may be a number or a string in any answer form (e.g. "ln(100)").
    """

    kind: Literal["real"] = "real"
    answer: _RealScalar | list[_RealScalar] | list[list[_RealScalar]]
    tol_kind: Literal["abs", "rel", "sigfigs"] = "abs"
    tol: float | None = Field(default=None, ge=0)
    sigfigs: int | None = Field(default=None, ge=1, le=17)

    @model_validator(mode="after")
    def _tolerance_given(self) -> RealQuestion:
        if self.tol_kind == "sigfigs" and (self.sigfigs is None or self.tol is not None):
            raise ValueError(f"{self.id}: tol_kind 'sigfigs' needs sigfigs = N and no tol")
        if self.tol_kind != "sigfigs" and (self.tol is None or self.sigfigs is not None):
            raise ValueError(f"{self.id}: tol_kind {self.tol_kind!r} needs tol and no sigfigs")
        return self

    @model_validator(mode="after")
    def _read_key(self) -> RealQuestion:
        self._set_key(self.answer, integer=False)
        return self

    def allowed_error(self, key: Fraction | float) -> Fraction:
        """The largest |x - key| that passes, for one key element."""
        key = Fraction(key)
        if self.tol_kind == "abs":
            return Fraction(repr(self.tol))
        if self.tol_kind == "rel":
            return Fraction(repr(self.tol)) * abs(key)
        if key == 0:
            return Fraction(0)
        assert self.sigfigs is not None  # _tolerance_given: tol_kind "sigfigs" comes with sigfigs
        return Fraction(1, 2) * Fraction(10) ** (_decimal_exponent(abs(key)) - self.sigfigs + 1)

    def describe_tolerance(self) -> str:
        if self.tol_kind == "abs":
            return msg("within ±{tol:g} of the answer", tol=self.tol)
        if self.tol_kind == "rel":
            assert self.tol is not None  # _tolerance_given: tol_kind "abs" and "rel" come with tol
            return msg("within {percent:g}% of the answer", percent=self.tol * 100)
        return msg("equal to the answer to {n} significant figures", n=self.sigfigs)


def _decimal_exponent(x: Fraction) -> int:
    """floor(log10(x)) for x > 0, exactly."""
    e = math.floor(math.log10(x))
    while Fraction(10) ** e > x:
        e -= 1
    while Fraction(10) ** (e + 1) <= x:
        e += 1
    return e


class InfQuestion(_QuestionBase):
    """An answer that is infinite (e.g. exp(15) in float16)."""

    kind: Literal["inf"] = "inf"
    answer: Literal["inf", "+inf", "-inf"] = "inf"


class ChoiceQuestion(_QuestionBase):
    """Multiple choice: `options` maps letters to texts; `answer` is the right letter."""

    kind: Literal["choice"] = "choice"
    options: dict[str, str]
    answer: str

    @model_validator(mode="after")
    def _letters(self) -> ChoiceQuestion:
        letters = list(self.options)
        if len(letters) < 2 or any(not re.fullmatch("[A-Z]", x) for x in letters):
            raise ValueError(f"{self.id}: options need two or more single capital letters A-Z")
        if self.answer not in self.options:
            raise ValueError(f"{self.id}: the answer {self.answer!r} is not one of {letters}")
        return self


Question = Annotated[
    IntegerQuestion | RealQuestion | InfQuestion | ChoiceQuestion, Field(discriminator="kind")
]
_QUESTION = TypeAdapter(Question)


def question_from_dict(
    data: Mapping[str, object],
) -> IntegerQuestion | RealQuestion | InfQuestion | ChoiceQuestion:
    """Build a question from exercise data (e.g. one `[[questions]]` table of a key file).

    Raises pydantic.ValidationError when the data is not a valid question.
    """
    return _QUESTION.validate_python(data)


# -- grading -----------------------------------------------------------------------------------


class AnswerResult(BaseModel):
    """The verdict on one answer. `message` teaches and never reveals the key.

    form_error: the answer could not be compared with the key at all (missing, unreadable,
    wrong type, or wrong shape), as opposed to a readable answer with wrong values.
    wrong_elements: 0-based positions of the elements that are off, for list answers.
    code: a stable id of the verdict, for translations and statistics.
    """

    model_config = ConfigDict(frozen=True)

    question_id: str
    passed: bool
    message: SkipValidation[str]  # a grader.locale Message: English text that can be translated
    form_error: bool = False
    code: str
    wrong_elements: tuple[tuple[int, ...], ...] = ()


def check_answers(
    questions: Iterable[IntegerQuestion | RealQuestion | InfQuestion | ChoiceQuestion],
    answers: Mapping[str, object],
) -> list[AnswerResult]:
    """Grade a learner's `[answers]` table, one result per question, in question order.

    Keys in `answers` that are not question ids are ignored.
    """
    return [check_answer(q, answers.get(q.id)) for q in questions]


def check_answer(
    question: IntegerQuestion | RealQuestion | InfQuestion | ChoiceQuestion, raw: object
) -> AnswerResult:
    """Grade one learner value against one question. Never raises on learner input."""
    try:
        match question:
            case ChoiceQuestion():
                return _check_choice(question, raw)
            case InfQuestion():
                return _check_inf(question, raw)
            case IntegerQuestion() | RealQuestion():
                return _check_numbers(question, raw)
        raise TypeError(f"not a question: {type(question).__name__}")
    except Exception:  # noqa: BLE001 - a bug here must not crash a grading run: fail the answer, visibly
        return AnswerResult(
            question_id=question.id,
            passed=False,
            form_error=True,
            code="internal-error",
            message=msg(
                "This answer could not be checked because of a grader error; please tell the course staff."
            ),
        )


def _result(
    question,
    passed: bool,
    code: str,
    message: str,
    *,
    form_error: bool = False,
    wrong: tuple[tuple[int, ...], ...] = (),
    hint: bool = False,
) -> AnswerResult:
    if hint and question.hint:
        message = msg("{message} {hint}", message=message, hint=question.hint)
    return AnswerResult(
        question_id=question.id,
        passed=passed,
        code=code,
        message=message,
        form_error=form_error,
        wrong_elements=wrong,
    )


def _form_error(question, error: ParseError) -> AnswerResult:
    return _result(question, False, error.code, error.message, form_error=True)


def _check_choice(question: ChoiceQuestion, raw: object) -> AnswerResult:
    letters = list(question.options)
    letter = parse_choice(raw, letters)
    if isinstance(letter, ParseError):
        if isinstance(raw, (str, int, float)) and not isinstance(raw, bool):
            said = unicodedata.normalize("NFKC", str(raw)).strip().casefold()
            if any(said == text.strip().casefold() for text in question.options.values()):
                return _result(
                    question,
                    False,
                    "not-a-letter",
                    form_error=True,
                    message=msg(
                        "Answer with the option's letter ({letters}), not its text.",
                        letters=_or_list(letters),
                    ),
                )
        return _form_error(question, letter)
    assert isinstance(raw, str)  # parse_choice reads letters from strings only
    _, written = _letter_and_text(raw, letters) or (letter, "")
    if written and not _same_option_text(written, question.options[letter]):
        # "B) 96": the letter and the text disagree; which one was meant is not ours to guess
        others = [x for x in letters if x != letter and _same_option_text(written, question.options[x])]
        if others:
            message = msg(
                "{text} gives the letter {letter} but the text of option {other}: "
                "answer with the letter you mean alone ({letters}).",
                text=repr(_show(raw.strip())),
                letter=letter,
                other=others[0],
                letters=_or_list(letters),
            )
        else:
            message = msg(
                "{text} gives the letter {letter}, but the text after it is not option {letter}'s: "
                "answer with the letter alone ({letters}), or with its text as printed.",
                text=repr(_show(raw.strip())),
                letter=letter,
                letters=_or_list(letters),
            )
        return _result(question, False, "choice-contradicts", message, form_error=True)
    if letter == question.answer:
        return _result(question, True, "correct", msg("Correct."))
    return _result(
        question, False, "wrong", msg("{letter} is not the right choice.", letter=letter), hint=True
    )


def _check_inf(question: InfQuestion, raw: object) -> AnswerResult:
    got = parse_answer(raw)
    if isinstance(got, ParseError):
        return _form_error(question, got)
    if isinstance(got, NumberArray):
        return _result(
            question,
            False,
            "wrong-shape",
            form_error=True,
            message=msg("Expected a single value, got {shape}.", shape=_describe_shape(got.shape)),
        )
    negative = question.answer == "-inf"
    if got.is_finite:
        return _result(
            question,
            False,
            "finite",
            hint=True,
            message=msg(
                "{shown} is a finite number. Compare the true result with the largest finite "
                "value the dtype can hold: what does a floating-point result become when it goes "
                "past that value (overflow)?",
                shown=_shown(got),
            ),
        )
    if (got.value < 0) != negative:
        return _result(
            question, False, "wrong-sign", msg("{shown} has the wrong sign.", shown=_shown(got)), hint=True
        )
    return _result(question, True, "correct", msg("Correct."))


def _shown(number: Number) -> str:
    """The learner's text, plus how it was read when that is not obvious from the text."""
    text = _show(number.text)
    if _PLAIN.fullmatch(number.text) or number.notation == "infinity":
        return text
    return msg("{text} (read as {value})", text=text, value=_format_value(number.value))


def _format_value(value: Fraction | float) -> str:
    if isinstance(value, Fraction):
        if value.denominator == 1 and abs(value) < 10**30:
            return str(value.numerator)
        return f"{float(value):.10g}"
    return repr(value)  # every digit of an inexact value, so 64.00000000000001 shows as such


Verdict = Literal["ok", "not-finite", "not-whole", "not-exact", "wrong", "out-of-tolerance"]


def _verdict(question: IntegerQuestion | RealQuestion, key: Number, got: Number) -> Verdict:
    """Compare one element of the learner's answer with one element of the key."""
    if not got.is_finite:
        return "not-finite"
    if isinstance(question, IntegerQuestion):
        if got.is_integer and got.value == key.value:
            return "ok"
        if got.is_integer and _looks_rounded(got):
            return "not-exact"
        return "wrong" if got.is_integer else "not-whole"
    difference = got.value - key.value
    if isinstance(difference, float):  # inexact somewhere: compare as floats, one rounding each side
        return "ok" if abs(difference) <= float(question.allowed_error(key.value)) else "out-of-tolerance"
    return "ok" if abs(difference) <= question.allowed_error(key.value) else "out-of-tolerance"


def _looks_rounded(number: Number) -> bool:
    """4.19e6, 4190000.0 (a TOML float that was 4.19e6), exp(ln(64)): not written exactly."""
    if number.notation == "scientific" or not isinstance(number.value, Fraction):  # not is_exact
        return True
    return number.notation == "decimal" and abs(number.value) >= 1000 and number.value % 1000 == 0


_SCALAR_TEXT: dict[str, str] = {  # msgids (grader.locale), filled with shown= and tolerance=
    "not-finite": N_("{shown} is not finite: this answer is a finite number."),
    "not-whole": N_("{shown} is not a whole number: this answer is an exact integer."),
    "not-exact": N_(
        "{shown} is not exact: this answer is an exact integer; write all its digits "
        "(e.g. 1,234,567 rather than 1.23e6)."
    ),
    "wrong": N_("{shown} is not correct."),
    "out-of-tolerance": N_("{shown} is not {tolerance}."),
}
_ELEMENT_NOTE: dict[str, str] = {
    "not-finite": N_("{where} ({shown}) is not finite."),
    "not-whole": N_("{where} ({shown}) is not a whole number: every element is an exact integer."),
    "not-exact": N_("{where} ({shown}) is not exact: write all its digits."),
}


def _describe_shape(shape: tuple[int, ...]) -> Message:
    if not shape:
        return msg("a single number")
    if len(shape) == 1:
        if shape[0] == 1:
            return msg("a list of {n} value", n=shape[0])
        return msg("a list of {n} values", n=shape[0])
    if len(shape) == 2:
        return msg("a {rows}×{columns} matrix", rows=shape[0], columns=shape[1])
    return msg("an array of shape {shape}", shape="×".join(map(str, shape)))


def _expected(question: IntegerQuestion | RealQuestion) -> Message:
    """What the question asks for and how to write it, for an answer in no form we read."""
    shape, whole = question.key.shape, isinstance(question, IntegerQuestion)
    if not shape:
        if whole:
            return msg("this answer is one whole number: write it as 1234567, 1,234,567 or 2**10")
        return msg("this answer is one number: {forms}", forms=_FORMS_HELP)
    if len(shape) == 1:
        first = list("abc"[: shape[0]]) + (["…"] if shape[0] > 3 else [])
        letters = ", ".join(first)
        if whole:
            return msg(
                "this answer is a list of {n} whole numbers: write it as [{items}], ({items}) or, "
                "for a shape, as torch.Size([{items}]) or {product}",
                n=shape[0],
                items=letters,
                product="×".join(first),
            )
        return msg(
            "this answer is a list of {n} numbers: write it as [{items}] (or as NumPy prints it)",
            n=shape[0],
            items=letters,
        )
    return msg(
        "this answer is {shape}: write it as a list of rows, e.g. [[a, b], [c, d]]",
        shape=_describe_shape(shape),
    )


def _check_numbers(question: IntegerQuestion | RealQuestion, raw: object) -> AnswerResult:
    key = question.key
    got = parse_answer(raw, key.shape)
    if isinstance(got, ParseError):
        if got.unrecognised and isinstance(raw, str):  # say what is expected, not what a number is
            message = msg(
                "Could not read {text}: {expected}.",
                text=repr(_show(raw.strip())),
                expected=_expected(question),
            )
            return _result(question, False, got.code, message, form_error=True)
        return _form_error(question, got)
    if got.shape != key.shape:
        shapes = dict(expected=_describe_shape(key.shape), got=_describe_shape(got.shape))
        if len(key.shape) >= 2 and math.prod(key.shape) == math.prod(got.shape):
            message = msg(
                "Expected {expected}, got {got}. Write a matrix as a list of rows, e.g. [[a, b], [c, d]].",
                **shapes,
            )
        else:
            message = msg("Expected {expected}, got {got}.", **shapes)
        return _result(question, False, "wrong-shape", message, form_error=True)
    if isinstance(got, Number):
        assert isinstance(key, Number)  # the same shape, (): a list is never shape ()
        verdict = _verdict(question, key, got)
        if verdict == "ok":
            return _result(question, True, "correct", msg("Correct."))
        tolerance = question.describe_tolerance() if isinstance(question, RealQuestion) else ""
        return _result(
            question,
            False,
            verdict,
            hint=True,
            message=Message(_SCALAR_TEXT[verdict], {"shown": _shown(got), "tolerance": tolerance}),
        )
    assert isinstance(key, NumberArray)  # the same shape as got's, a list's
    return _check_elements(question, key, got)


def _check_elements(
    question: IntegerQuestion | RealQuestion, key: NumberArray, got: NumberArray
) -> AnswerResult:
    shape = key.shape
    positions = [_unravel(i, shape) for i in range(len(key.values))]
    verdicts = [_verdict(question, k, g) for k, g in zip(key.values, got.values, strict=True)]
    wrong = [i for i, v in enumerate(verdicts) if v != "ok"]
    if not wrong:
        return _result(question, True, "correct", msg("Correct."))

    if isinstance(question, RealQuestion):
        criterion = question.describe_tolerance()
    else:
        criterion = msg("correct (each element is an exact integer)")
    named = _capital(_positions(positions, wrong, shape))
    if len(wrong) == 1:
        parts = [msg("{positions} is not {criterion}.", positions=named, criterion=criterion)]
    else:
        parts = [msg("{positions} are not {criterion}.", positions=named, criterion=criterion)]

    noted: set[str] = set()
    for i in wrong:
        if verdicts[i] in _ELEMENT_NOTE and verdicts[i] not in noted:
            noted.add(verdicts[i])
            where_i = _where(positions[i], len(shape))
            parts.append(
                Message(
                    _ELEMENT_NOTE[verdicts[i]],
                    {"where": _capital(where_i), "shown": _show(got.values[i].text)},
                )
            )
    parts.extend(_order_notes(question, key, got, wrong, positions))
    return _result(
        question,
        False,
        "wrong-elements",
        join(parts, " "),
        hint=True,
        wrong=tuple(positions[i] for i in wrong),
    )


def _order_notes(
    question, key: NumberArray, got: NumberArray, wrong: list[int], positions: list[tuple[int, ...]]
) -> list[Message]:
    """Point out swapped pairs and a transposed matrix: right values in the wrong places."""

    def ok(i: int, j: int) -> bool:  # learner's element i against key element j
        return _verdict(question, key.values[j], got.values[i]) == "ok"

    shape = key.shape
    if len(shape) == 2 and shape[0] == shape[1]:
        n = shape[0]
        if all(ok(r * n + c, c * n + r) for r in range(n) for c in range(n)):
            return [msg("The matrix looks transposed: write it as a list of rows.")]
    notes = []
    for a, i in enumerate(wrong):
        for j in wrong[a + 1 :]:
            if ok(i, j) and ok(j, i):
                pair = _positions(positions, [i, j], shape, total=False)
                notes.append(msg("{pair} look swapped: check the order.", pair=_capital(pair)))
    return notes[:3]


def _positions(
    positions: list[tuple[int, ...]], chosen: list[int], shape: tuple[int, ...], total: bool = True
) -> str:
    """'elements 1 and 2 of 4', 'row 2, column 1 of the 2×2 matrix' (at most six named)."""
    if len(shape) == 1:
        numbers = [str(positions[i][0] + 1) for i in chosen]
        named = _or_list(
            numbers[:6] + ([msg("{n} more", n=len(numbers) - 6)] if len(numbers) > 6 else []), "and"
        )
        text = (
            msg("elements {named}", named=named) if len(chosen) > 1 else msg("element {named}", named=named)
        )
        return msg("{text} of {n}", text=text, n=shape[0]) if total else text
    labels = [_where(positions[i], len(shape)) for i in chosen][:6]
    if len(chosen) > 6:
        labels.append(msg("{n} more", n=len(chosen) - 6))
    if len(labels) == 1:
        named = labels[0]
    elif len(labels) == 2:
        named = msg("{a} and {b}", a=labels[0], b=labels[1])
    else:
        named = msg("{head}; and {last}", head=join(labels[:-1], "; "), last=labels[-1])
    if not total:
        return named
    if len(shape) == 2:
        whole = msg("the {rows}×{columns} matrix", rows=shape[0], columns=shape[1])
    else:
        whole = _describe_shape(shape)
    return msg("{named} of {whole}", named=named, whole=whole)


def _capital(text: str) -> str:
    if isinstance(text, Message):
        return text.capitalized()
    return text[:1].upper() + text[1:]


def _unravel(index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    position = []
    for size in reversed(shape):
        index, rest = divmod(index, size)
        position.append(rest)
    return tuple(reversed(position))
