"""GitHub Actions expressions (`${{ ... }}`), as much of the language as our workflows use: literals, context lookups
(`inputs.spec`, `steps.deployment.outputs.page_url`), `!`, `==`, `!=`, `&&`, `||` (which return an operand, as in
GitHub), parentheses and the functions startsWith, endsWith, contains, format, success, failure, cancelled and
always. Anything else is an error, so a workflow cannot use something the harness would get wrong silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable

TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||[!().,\[\]])"
                   r"|(?P<name>[A-Za-z_][\w-]*))")  # fmt: skip
EMBEDDED = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)


class ExpressionError(ValueError):
    pass


def falsy(value) -> bool:
    return value in (None, False, 0, "", 0.0)


def text(value) -> str:
    """How GitHub writes a value into a string: null as empty, booleans lowercase."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Evaluator:
    """contexts: {"inputs": {...}, "github": {...}, ...}; status: the job status functions (success, failure, ...)."""

    def __init__(self, contexts: dict, status: dict[str, Callable[[], bool]] | None = None):
        self.contexts = contexts
        self.status = status or {}

    def substitute(self, template: str) -> str:
        return EMBEDDED.sub(lambda m: text(self.evaluate(m.group(1))), template)

    def condition(self, expression: str | bool | None, default: str = "success()") -> bool:
        """An `if:`: without a status function it is implicitly `success() && (...)`, as on GitHub."""
        if expression is None:
            expression = default
        if isinstance(expression, bool):
            return expression and self.evaluate(default)
        inner = expression.strip()
        match = re.fullmatch(r"\$\{\{(.*)\}\}", inner, re.DOTALL)
        inner = match.group(1) if match else inner
        if not re.search(r"\b(success|failure|cancelled|always)\s*\(", inner):
            inner = f"{default} && ({inner})"
        return not falsy(self.evaluate(inner))

    def evaluate(self, expression: str):
        self.tokens = self._tokenize(expression)
        self.pos = 0
        value = self._or()
        if self.pos != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.pos][1]!r} in {expression!r}")
        return value

    @staticmethod
    def _tokenize(expression: str) -> list[tuple[str, str]]:
        out, pos = [], 0
        expression = expression.rstrip()
        while pos < len(expression):
            m = TOKEN.match(expression, pos)
            if not m:
                raise ExpressionError(f"cannot read {expression[pos:]!r}")
            kind = m.lastgroup
            out.append((kind, m.group(kind)))
            pos = m.end()
        return out

    def _peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise ExpressionError("unexpected end of expression")
        token = self.tokens[self.pos]
        if expected is not None and token[1] != expected:
            raise ExpressionError(f"expected {expected!r}, got {token[1]!r}")
        self.pos += 1
        return token

    def _left_to_right(self, ops: tuple[str, ...], operand, combine):
        """operand (op operand)*, folded from the left: combine(value, op, right)."""
        value = operand()
        while self._peek() in ops:
            op = self._take()[1]
            value = combine(value, op, operand())
        return value

    def _or(self):  # a || b: a if a is truthy, else b
        return self._left_to_right(("||",), self._and, lambda value, _, right: right if falsy(value) else value)

    def _and(self):  # a && b: b if a is truthy, else a
        return self._left_to_right(("&&",), self._compare, lambda value, _, right: value if falsy(value) else right)

    def _compare(self):  # == and != compare loosely (`_loose`)
        return self._left_to_right(("==", "!="), self._unary, lambda value, op, right: _loose_equal(value, right, op))

    def _unary(self):
        if self._peek() == "!":
            self._take()
            return falsy(self._unary())
        return self._primary()

    def _primary(self):
        kind, value = self._take()
        if value == "(":
            inner = self._or()
            self._take(")")
            return inner
        if kind == "num":
            return float(value) if "." in value else int(value)
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind != "name":
            raise ExpressionError(f"unexpected {value!r}")
        if value in ("true", "false"):
            return value == "true"
        if value == "null":
            return None
        if self._peek() == "(":
            return self._call(value)
        current = self.contexts.get(value)
        if value not in self.contexts:
            raise ExpressionError(f"unknown context {value!r}")
        while self._peek() in (".", "["):
            if self._take()[1] == ".":
                key = self._take()[1]
            else:
                key = self._or()
                self._take("]")
            current = current.get(key) if isinstance(current, dict) else None
        return current

    def _call(self, name: str):
        self._take("(")
        args = []
        while self._peek() != ")":
            args.append(self._or())
            if self._peek() == ",":
                self._take()
        self._take(")")
        if name in ("success", "failure", "cancelled", "always"):
            if name not in self.status:
                raise ExpressionError(f"{name}() is not available here")
            return self.status[name]()
        lower = [text(a).lower() for a in args]
        if name == "startsWith":
            return lower[0].startswith(lower[1])
        if name == "endsWith":
            return lower[0].endswith(lower[1])
        if name == "contains":
            return lower[1] in lower[0] if not isinstance(args[0], list) else args[1] in args[0]
        if name == "format":
            return re.sub(r"\{(\d+)\}", lambda m: text(args[1 + int(m.group(1))]), args[0])
        raise ExpressionError(f"function {name}() is not supported by the harness")


def _loose_equal(value, right, op: str) -> bool:
    equal = _loose(value) == _loose(right)
    return equal if op == "==" else not equal


def _loose(value):
    """GitHub compares loosely: strings case-insensitively, and values of different types as numbers."""
    return value.lower() if isinstance(value, str) else value
