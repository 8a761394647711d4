"""The part of CEL that DRA device selectors are written in, evaluated as Kubernetes does
(pure; no CEL library for Python is installed here, so this is hand-written and small).

Read: ``device.driver``, ``device.attributes["domain"].name`` (and ``["name"]``),
``device.capacity["domain"].name``; string, int, bool, list literals; ``==``, ``!=``, ``<``,
``<=``, ``>``, ``>=`` (ints, strings), ``in`` (a list, or a name in an attribute map),
``&&``, ``||``, ``!``, parentheses, ``has(...)``; ``quantity("40Gi")`` (every suffix of a
Kubernetes quantity) and ``semver("9.0.0")`` with ``compareTo``, ``isGreaterThan``,
``isLessThan`` and ``==``; on strings ``matches``, ``startsWith``, ``endsWith``,
``contains``, ``lowerAscii``, ``upperAscii``.

As in Kubernetes: a name a device does not have is an error (not false); ``&&`` and ``||``
are commutative (``false && error`` is false); an expression that is not a bool is an error.
Anything else (arithmetic, ``?:``, macros such as ``exists``, ``cel.bind``, ``size``, other
functions) raises ``Unsupported`` naming it — never evaluated as something else.

``matches`` follows RE2, which never backtracks; Python's ``re`` does, so a pattern is
refused when it is longer than 256 characters, uses what RE2 has not (backreferences,
lookaround, atomic groups, possessive repeats), or nests an unbounded repeat inside another
(``(a+)+``, the catastrophic shape). The strings it runs on are the attribute values of
gpupool's catalog, at most a few dozen characters.
"""

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

from gpupool.kube.quantity import quantity as parse_quantity
from gpupool.model import SpecError

MAX_PATTERN = 256
MAX_EXPRESSION = 10 * 1024  # resource.k8s.io's CELSelectorExpressionMaxLength
TOO_DEEP = "an expression nested this deeply (Python's stack; kube-scheduler's cost limit)"


class Unsupported(Exception):
    """A construct gpupool does not evaluate (named in the message)."""


class CelError(Exception):
    """What Kubernetes' evaluation also fails on: a missing name, a type mismatch, a syntax
    error; an allocation whose selector errs fails."""


@dataclass(frozen=True, slots=True)
class Quantity:
    value: Decimal


@dataclass(frozen=True, slots=True, order=True)
class Version:
    parts: tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Names:
    """A device's attributes or capacities of one domain. ``hidden``: names whose values
    differ from card to card or node to node (a UUID, an index), which gpupool does not
    select by — reading one is ``Unsupported``, naming ``why``."""

    values: Mapping[str, Any]
    hidden: Mapping[str, str] = field(default_factory=dict)
    what: str = "attribute"

    def get(self, name: str) -> Any:
        if name in self.hidden:
            raise Unsupported(f"the {self.what} {name!r} ({self.hidden[name]})")
        if name not in self.values:
            raise CelError(f"no such key: {self.what} {name!r}")
        return self.values[name]

    def has(self, name: str) -> bool:
        if name in self.hidden:
            raise Unsupported(f"the {self.what} {name!r} ({self.hidden[name]})")
        return name in self.values


@dataclass(frozen=True, slots=True)
class Device:
    """What a selector sees as ``device``: its driver, and per domain its names."""

    driver: str
    attributes: Mapping[str, Names]
    capacity: Mapping[str, Names]


@dataclass(frozen=True, slots=True)
class _Domains:
    by_domain: Mapping[str, Names]
    what: str

    def get(self, domain: object) -> Names:
        if not isinstance(domain, str):
            raise CelError(f"a domain is a string, not {domain!r}")
        return self.by_domain.get(domain) or Names({}, what=self.what)  # no names: empty


# the syntax tree: ("lit", v) ("id", name) ("sel", x, name) ("idx", x, key)
# ("call", target|None, name, args) ("not", x) ("op", op, a, b) ("list", items)
Node = tuple[Any, ...]

_TOKEN = re.compile(
    r"""\s*(?:(?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<num>\d[\w.]*)
    |(?P<id>[A-Za-z_]\w*)
    |(?P<op>==|!=|<=|>=|&&|\|\||[-<>!()\[\].,?:+*/%{}]))""",
    re.X,
)
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t"}


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise CelError(f"syntax error at {text[pos : pos + 12]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    out.append(("end", ""))
    return out


def _string(raw: str) -> str:
    body, out, i = raw[1:-1], [], 0
    while i < len(body):
        if body[i] == "\\":
            if body[i + 1] not in _ESCAPES:
                raise Unsupported(f"the escape \\{body[i + 1]} in a string")
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i]

    def take(self, want: str | None = None) -> tuple[str, str]:
        tok = self.toks[self.i]
        if want is not None and tok[1] != want:
            raise CelError(f"syntax error: expected {want!r}, found {tok[1] or 'the end'!r}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.or_()
        if self.peek()[0] != "end":
            tok = self.peek()[1]
            raise (Unsupported if tok == "?" else CelError)(
                "the conditional operator ?:" if tok == "?" else f"syntax error at {tok!r}"
            )
        return node

    def or_(self) -> Node:
        node = self.and_()
        while self.peek()[1] == "||":
            self.take()
            node = ("op", "||", node, self.and_())
        return node

    def and_(self) -> Node:
        node = self.rel()
        while self.peek()[1] == "&&":
            self.take()
            node = ("op", "&&", node, self.rel())
        return node

    def rel(self) -> Node:
        node = self.arith()
        while self.peek()[1] in ("==", "!=", "<", "<=", ">", ">=", "in"):
            op = self.take()[1]
            node = ("op", op, node, self.arith())
        return node

    def arith(self) -> Node:
        node = self.unary()
        if self.peek()[1] in ("+", "-", "*", "/", "%"):
            raise Unsupported(f"arithmetic ({self.peek()[1]})")
        return node

    def unary(self) -> Node:
        if self.peek()[1] == "!":
            self.take()
            return ("not", self.unary())
        if self.peek()[1] == "-":
            raise Unsupported("arithmetic (-)")
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while self.peek()[1] in (".", "["):
            if self.take()[1] == "[":
                node = ("idx", node, self.or_())
                self.take("]")
                continue
            kind, name = self.take()
            if kind != "id":
                raise CelError(f"syntax error: a name after '.', not {name!r}")
            if self.peek()[1] == "(":
                node = ("call", node, name, self.args())
            else:
                node = ("sel", node, name)
        return node

    def args(self) -> list[Node]:
        self.take("(")
        out: list[Node] = []
        while self.peek()[1] != ")":
            out.append(self.or_())
            if self.peek()[1] != ")":
                self.take(",")
        self.take(")")
        return out

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "str":
            return ("lit", _string(text))
        if kind == "num":
            if not text.isdigit():
                raise Unsupported(f"the number {text} (gpupool reads whole decimal numbers)")
            return ("lit", int(text))
        if kind == "id":
            if text in ("true", "false"):
                return ("lit", text == "true")
            if self.peek()[1] == "(":
                return ("call", None, text, self.args())
            if self.peek()[0] == "str" and text in ("r", "R", "b", "B"):
                raise Unsupported("raw and byte strings")
            return ("id", text)
        if text == "(":
            node = self.or_()
            self.take(")")
            return node
        if text == "[":
            items: list[Node] = []
            while self.peek()[1] != "]":
                items.append(self.or_())
                if self.peek()[1] != "]":
                    self.take(",")
            self.take("]")
            return ("list", items)
        if text == "{":
            raise Unsupported("map literals")
        raise CelError(f"syntax error at {text or 'the end'!r}")


@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed selector; ``matches`` evaluates it for one device."""

    text: str
    tree: Node

    def matches(self, device: Device) -> bool:
        try:
            out = _eval(self.tree, device)
        except RecursionError:
            raise Unsupported(TOO_DEEP) from None
        if not isinstance(out, bool):
            raise CelError(f"the expression gives {_type(out)}, not a bool")
        return out


@lru_cache(maxsize=4096)
def compile_selector(text: str) -> Selector:
    """Parse ``text`` (once per text: claims repeat their selectors every cycle);
    Unsupported or CelError say what is wrong."""
    if len(text) > MAX_EXPRESSION:
        raise CelError(f"an expression over {MAX_EXPRESSION} characters (the API server's limit)")
    try:
        return Selector(text, _Parser(text).parse())
    except RecursionError:
        raise Unsupported(TOO_DEEP) from None


def _type(v: object) -> str:
    return {str: "string", bool: "bool", int: "int"}.get(type(v), type(v).__name__)


def _eval(node: Node, device: Device) -> Any:
    tag = node[0]
    if tag == "lit":
        return node[1]
    if tag == "id":
        if node[1] != "device":
            raise Unsupported(f"the name {node[1]!r} (a selector reads device)")
        return device
    if tag == "list":
        return [_eval(n, device) for n in node[1]]
    if tag == "not":
        v = _eval(node[1], device)
        if not isinstance(v, bool):
            raise CelError(f"! of {_type(v)}")
        return not v
    if tag == "sel":
        return _select(_eval(node[1], device), node[2])
    if tag == "idx":
        return _select(_eval(node[1], device), _eval(node[2], device))
    if tag == "call":
        return _call(node, device)
    return _op(node[1], node[2], node[3], device)


def _select(target: Any, name: object) -> Any:
    if isinstance(target, Device) and name in ("driver", "attributes", "capacity"):
        if name == "driver":
            return target.driver
        by = target.attributes if name == "attributes" else target.capacity
        return _Domains(by, "attribute" if name == "attributes" else "capacity")
    if isinstance(target, _Domains):
        return target.get(name)
    if isinstance(target, Names) and isinstance(name, str):
        return target.get(name)
    if isinstance(target, list) and isinstance(name, int) and not isinstance(name, bool):
        if not 0 <= name < len(target):
            raise CelError(f"index {name} out of range")
        return target[name]
    raise CelError(f"no field {name!r} on {_type(target)}")


def _logic(op: str, a: Node, b: Node, device: Device) -> bool:
    """``&&`` / ``||`` as CEL has them: either side decides, else an error of either."""
    results: list[bool | CelError] = []
    for side in (a, b):
        try:
            v = _eval(side, device)
        except CelError as e:
            results.append(e)
            continue
        if not isinstance(v, bool):
            results.append(CelError(f"{op} of {_type(v)}"))
            continue
        results.append(v)
    decider = op == "||"  # true decides ||, false decides &&
    if decider in results:
        return decider
    for r in results:
        if isinstance(r, CelError):
            raise r
    return not decider


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if type(a) is not type(b):
        return False  # heterogeneous equality: different types are not equal
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _op(op: str, a: Node, b: Node, device: Device) -> Any:
    if op in ("&&", "||"):
        return _logic(op, a, b, device)
    left, right = _eval(a, device), _eval(b, device)
    if op == "==":
        return _equal(left, right)
    if op == "!=":
        return not _equal(left, right)
    if op == "in":
        if isinstance(right, list):
            return any(_equal(left, x) for x in right)
        if isinstance(right, Names) and isinstance(left, str):
            return right.has(left)
        raise CelError(f"in of {_type(right)}")
    ordered = (isinstance(left, int) and isinstance(right, int)) or (
        isinstance(left, str) and isinstance(right, str)
    )
    if not ordered or isinstance(left, bool) or isinstance(right, bool):
        hint = " (use compareTo)" if isinstance(left, (Quantity, Version)) else ""
        raise CelError(f"no {op} for {_type(left)} and {_type(right)}{hint}")
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]


def _call(node: Node, device: Device) -> Any:
    _, target_node, name, arg_nodes = node
    if target_node is None and name == "has":
        if len(arg_nodes) != 1 or arg_nodes[0][0] != "sel":
            raise CelError("has() takes one field selection")
        _, inner, field_name = arg_nodes[0]
        inner_v = _eval(inner, device)
        if not isinstance(inner_v, Names):
            raise Unsupported(f"has() of {_type(inner_v)}")
        return inner_v.has(field_name)
    if target_node is None:
        fn = _GLOBALS.get(name)
        if fn is None:
            raise Unsupported(f"the function {name}()")
        return fn(*_arity(name, [_eval(n, device) for n in arg_nodes], 1))
    if target_node[0] == "id" and target_node[1] != "device":
        raise Unsupported(f"the function {target_node[1]}.{name}()")
    if not any(n == name for _, n in _METHODS):
        raise Unsupported(f"the method or macro {name}()")
    args = [_eval(n, device) for n in arg_nodes]
    target = _eval(target_node, device)
    method = _METHODS.get((type(target), name))
    if method is None:
        raise Unsupported(f"the method {name}() on {_type(target)}")
    return method(target, *args)


def _arity(name: str, args: list[Any], n: int) -> list[Any]:
    if len(args) != n:
        raise CelError(f"{name}() takes {n} argument(s)")
    return args


def _quantity(text: object) -> Quantity:
    if not isinstance(text, str):
        raise CelError("quantity() takes a string")
    try:
        return Quantity(parse_quantity(text, "quantity"))
    except SpecError as e:
        raise CelError(str(e)) from None


_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


def version(text: object) -> Version:
    m = _SEMVER.match(text) if isinstance(text, str) else None
    if m is None:
        raise CelError(f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH)")
    return Version((int(m.group(1)), int(m.group(2)), int(m.group(3))))


def _compare(a: Any, b: Any) -> int:
    if type(a) is not type(b):
        raise CelError(f"compareTo of {_type(a)} and {_type(b)}")
    x, y = (a.value, b.value) if isinstance(a, Quantity) else (a, b)
    return int((x > y) - (x < y))


def _string_arg(fn: Callable[[str, str], bool]) -> Callable[[str, object], bool]:
    def call(s: str, arg: object) -> bool:
        if not isinstance(arg, str):
            raise CelError(f"a string argument, not {_type(arg)}")
        return fn(s, arg)

    return call


def _unrepeatable(tree: Any, inside_unbounded: bool = False) -> None:
    """Refuse what RE2 has not, and an unbounded repeat nested in another."""
    for op, av in tree:
        kind = str(op)
        if kind in ("GROUPREF", "GROUPREF_EXISTS", "ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
            raise Unsupported(f"the regular expression construct {kind} (RE2 has none)")
        if kind == "POSSESSIVE_REPEAT":
            raise Unsupported("possessive repeats in a regular expression (RE2 has none)")
        if kind in ("MAX_REPEAT", "MIN_REPEAT"):
            _, high, sub = av
            unbounded = high > 1000  # MAXREPEAT, what *, + and {n,} give
            if unbounded and inside_unbounded:
                raise Unsupported(
                    "a repeat inside a repeat in a regular expression (catastrophic "
                    "backtracking outside RE2)"
                )
            _unrepeatable(sub, inside_unbounded or unbounded)
        elif kind == "SUBPATTERN":
            _unrepeatable(av[-1], inside_unbounded)
        elif kind == "BRANCH":
            for alt in av[1]:
                _unrepeatable(alt, inside_unbounded)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def pattern(text: str) -> re.Pattern[str]:
    """``text`` compiled for ``matches`` after the guards above."""
    if text in _PATTERNS:
        return _PATTERNS[text]
    if len(text) > MAX_PATTERN:
        raise Unsupported(f"a regular expression over {MAX_PATTERN} characters")
    import re._parser as sre  # type: ignore[import-not-found]  # RE2's shape is checked on it

    try:
        tree = sre.parse(text)
    except re.error as e:
        raise CelError(f"regular expression {text!r}: {e}") from None
    _unrepeatable(tree)
    compiled = _PATTERNS[text] = re.compile(text)
    return compiled


_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = _UPPER.lower()
_GLOBALS: dict[str, Callable[..., Any]] = {"quantity": _quantity, "semver": version}
_METHODS: dict[tuple[type, str], Callable[..., Any]] = {
    (str, "matches"): _string_arg(lambda s, p: pattern(p).search(s) is not None),
    (str, "startsWith"): _string_arg(str.startswith),
    (str, "endsWith"): _string_arg(str.endswith),
    (str, "contains"): _string_arg(lambda s, p: p in s),
    (str, "lowerAscii"): lambda s: s.translate(str.maketrans(_UPPER, _LOWER)),
    (str, "upperAscii"): lambda s: s.translate(str.maketrans(_LOWER, _UPPER)),
    **{
        (t, name): fn
        for t in (Quantity, Version)
        for name, fn in (
            ("compareTo", _compare),
            ("isGreaterThan", lambda a, b: _compare(a, b) > 0),
            ("isLessThan", lambda a, b: _compare(a, b) < 0),
        )
    },
}
