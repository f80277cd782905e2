# ruff: noqa: E501  (programs read best one statement per source line)
"""Hostile candidates that redefine the names a task's tests take from trusted code.

Each task's tests use one name besides the entry point (a helper function, a constant, a
class, an imported module) that the prompt, the reference solution or ``setup_code`` defines.
Each case gives two candidates that both sabotage that name in their own module:
``correct`` computes the entry point right without it (must pass), ``wrong`` gets the entry
point wrong and would pass only if the tests used the sabotaged name (must fail).
"""

from __future__ import annotations

from typing import Any

# ------------------------------------------------------------------------------- tasks
POLY_PROMPT = (
    "import math\n\n\n"
    "def poly(xs: list, x: float) -> float:\n"
    '    """The polynomial with coefficients xs evaluated at x."""\n'
    "    return sum(c * math.pow(x, i) for i, c in enumerate(xs))\n\n\n"
    "def find_root(xs: list) -> float:\n"
    '    """A root of the line xs[0] + xs[1] * x."""\n'
)
CODEC_PROMPT = (
    "def encode(s: str) -> str:\n"
    '    """Shift every lowercase letter one place on."""\n'
    "    return ''.join(chr((ord(c) - 97 + 1) % 26 + 97) for c in s)\n\n\n"
    "def decode(s: str) -> str:\n"
    '    """The inverse of encode."""\n'
)
CODEC_BODY = "    return ''.join(chr((ord(c) - 97 - 1) % 26 + 97) for c in s)\n"
CODEC_CHECK = (
    "def check(candidate):\n"
    "    assert candidate(encode('hello')) == 'hello'\n"
    "    assert candidate(encode('zebra')) == 'zebra'\n"
)
VOWELS_PROMPT = (
    "VOWELS = 'aeiou'\n\n\n"
    "def count_vowels(s: str) -> int:\n"
    '    """How many characters of s are in VOWELS."""\n'
)
MONEY_PROMPT = (
    "class Money:\n"
    "    def __init__(self, cents: int) -> None:\n"
    "        self.cents = cents\n\n"
    "    def text(self) -> str:\n"
    "        return f'${self.cents // 100}.{self.cents % 100:02d}'\n\n\n"
    "def total(cents: list) -> str:\n"
    '    """The sum of the amounts, written as Money.text() writes it."""\n'
)
HYPOT_PROMPT = (
    "import math\n\n\n"
    "def hypot(a: float, b: float) -> float:\n"
    '    """The length of the hypotenuse."""\n'
)
SORTED_PROMPT = (
    "def sorted_copy(xs: list) -> list:\n"
    "    return sorted(xs)\n\n\n"
    "def my_sort(xs: list) -> list:\n"
    '    """xs in ascending order, without calling sorted()."""\n'
)


def _task(entry: str, prompt: str, body: str, style: str = "check", **spec: Any) -> dict[str, Any]:
    return {
        "prompt": prompt,
        "reference_solution": prompt + body,
        "verifier": {
            "family": "code",
            "style": style,
            "entry_point": entry,
            "timeout_s": 5,
            **spec,
        },
    }


TASKS: dict[str, dict[str, Any]] = {
    "poly": _task(
        "find_root",
        POLY_PROMPT,
        "    return -xs[0] / xs[1]\n",
        test_code="def check(candidate):\n"
        "    assert abs(poly([1, 2], candidate([1, 2]))) < 1e-9\n"
        "    assert abs(poly([-6, 3], candidate([-6, 3]))) < 1e-9\n",
    ),
    "codec": _task("decode", CODEC_PROMPT, CODEC_BODY, test_code=CODEC_CHECK),
    "vowels": _task(
        "count_vowels",
        VOWELS_PROMPT,
        "    return sum(c in VOWELS for c in s)\n",
        test_code="def check(candidate):\n"
        "    assert candidate('education') == sum(c in VOWELS for c in 'education')\n"
        "    assert candidate('rhythm') == len([c for c in 'rhythm' if c in VOWELS])\n",
    ),
    "money": _task(
        "total",
        MONEY_PROMPT,
        "    return Money(sum(cents)).text()\n",
        test_code="def check(candidate):\n"
        "    assert candidate([150, 275]) == Money(425).text()\n"
        "    assert candidate([5]) == Money(5).text()\n",
    ),
    "hypot": _task(
        "hypot",
        HYPOT_PROMPT,
        "    return math.sqrt(a * a + b * b)\n",
        test_code="def check(candidate):\n"
        "    assert math.isclose(candidate(3, 4), 5.0)\n"
        "    assert math.isclose(candidate(5, 12), 13.0)\n",
    ),
    "sorted_eq": _task(
        "my_sort",
        SORTED_PROMPT,
        "    out = list(xs)\n    out.sort()\n    return out\n",
        test_code="def check(candidate):\n"
        "    assert candidate([3, 1, 2]) == sorted_copy([3, 1, 2])\n"
        "    assert candidate([5, -1]) == sorted_copy([5, -1])\n",
    ),
    "codec_asserts": _task(
        "decode",
        CODEC_PROMPT,
        CODEC_BODY,
        style="asserts",
        asserts=["assert decode(encode('abc')) == 'abc'", "assert decode(encode('xyz')) == 'xyz'"],
    ),
    "codec_pytest_import": _task(
        "decode",
        CODEC_PROMPT,
        CODEC_BODY,
        style="pytest",
        test_code="from solution import encode, decode\n\n"
        "def test_word():\n    assert decode(encode('word')) == 'word'\n\n"
        "def test_zoo():\n    assert decode(encode('zoo')) == 'zoo'\n",
    ),
    "codec_pytest_module": _task(
        "decode",
        CODEC_PROMPT,
        CODEC_BODY,
        style="pytest",
        test_code="import solution\n\n"
        "def test_word():\n    assert solution.decode(solution.encode('word')) == 'word'\n",
    ),
    # the prompt is prose: the helper is defined only by the reference solution
    "codec_reference_only": {
        **_task("decode", CODEC_PROMPT, CODEC_BODY, test_code=CODEC_CHECK),
        "prompt": "Write decode(s), the inverse of encode(s) (which shifts letters one on).",
    },
}

# ------------------------------------------------------------------------------- candidates
CODEC_RIGHT = "def decode(s):\n    return ''.join(chr((ord(c) - 97 - 1) % 26 + 97) for c in s)\n"
CODEC_IDENTITY = "def encode(s):\n    return s\n"
ALWAYS_EQUAL = (
    "class _Anything:\n"
    "    def __eq__(self, other): return True\n"
    "    def __ne__(self, other): return False\n"
    "    def __lt__(self, other): return True\n"
    "    def __abs__(self): return self\n"
    "    def __call__(self, *a, **k): return self\n"
    "    __hash__ = None\n"
)

# name -> (task, candidate correct for the entry point, candidate wrong for it)
CASES: dict[str, tuple[str, str, str]] = {
    "helper_returns_constant": (
        "poly",
        "def find_root(xs):\n    return -xs[0] / xs[1]\n\ndef poly(xs, x):\n    return 1e9\n",
        "def find_root(xs):\n    return 0.0\n\ndef poly(xs, x):\n    return 0\n",
    ),
    "helper_returns_expected_value": (
        "codec",
        CODEC_RIGHT + CODEC_IDENTITY,
        "def decode(s):\n    return s\n\n" + CODEC_IDENTITY,
    ),
    "constant_monkeypatched": (
        "vowels",
        "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s)\n\nVOWELS = ''\n",
        "VOWELS = ''\n\ndef count_vowels(s):\n    return 0\n",
    ),
    "class_redefined": (
        "money",
        "def total(cents):\n    n = sum(cents)\n    return f'${n // 100}.{n % 100:02d}'\n\n"
        "class Money:\n    def __init__(self, cents):\n        pass\n\n"
        "    def text(self):\n        return 'free'\n",
        "class Money:\n    def __init__(self, cents):\n        pass\n\n"
        "    def text(self):\n        return 'free'\n\ndef total(cents):\n    return 'free'\n",
    ),
    "imported_module_shadowed": (
        "hypot",
        "def hypot(a, b):\n    return (a * a + b * b) ** 0.5\n\n"
        "class math:\n    isclose = staticmethod(lambda *a, **k: False)\n",
        "class math:\n    isclose = staticmethod(lambda *a, **k: True)\n\n"
        "def hypot(a, b):\n    return 0.0\n",
    ),
    "helper_is_always_equal_object": (
        "sorted_eq",
        ALWAYS_EQUAL + "def my_sort(xs):\n    out = list(xs)\n    out.sort()\n    return out\n\n"
        "sorted_copy = _Anything()\n",
        ALWAYS_EQUAL + "sorted_copy = _Anything()\n\ndef my_sort(xs):\n    return None\n",
    ),
    "helper_in_asserts": (
        "codec_asserts",
        CODEC_RIGHT + CODEC_IDENTITY,
        "decode = encode = lambda s: s\n",
    ),
    "helper_imported_from_solution": (
        "codec_pytest_import",
        CODEC_RIGHT + CODEC_IDENTITY,
        "decode = encode = lambda s: s\n",
    ),
    "helper_as_solution_attribute": (
        "codec_pytest_module",
        CODEC_RIGHT + CODEC_IDENTITY,
        "decode = encode = lambda s: s\n",
    ),
    "helper_only_in_reference": (
        "codec_reference_only",
        CODEC_RIGHT + CODEC_IDENTITY,
        "decode = encode = lambda s: s\n",
    ),
}

# Candidates that tamper with builtins and modules in their own process; the tests process
# must not notice. name -> (task, correct candidate, wrong candidate)
TAMPERING: dict[str, tuple[str, str, str]] = {
    "builtins_replaced": (
        "poly",
        "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.sum = lambda *a: 0\n"
        "def find_root(xs):\n    return -xs[0] / xs[1]\n",
        "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.sum = lambda *a: 0\n"
        "def find_root(xs):\n    return 0.0\n",
    ),
    "builtins_shadowed_in_module": (
        "vowels",
        "def sum(*a):\n    return 0\n\ndef len(x):\n    return 0\n\n"
        "def count_vowels(s):\n    n = 0\n    for c in s:\n        n += c in 'aeiou'\n    return n\n",
        "def sum(*a):\n    return 0\n\ndef len(x):\n    return 0\n\ndef count_vowels(s):\n    return 0\n",
    ),
    "builtins_deleted": (
        "vowels",
        "import builtins\nfor n in ('sum', 'abs', 'AssertionError'):\n    delattr(builtins, n)\n"
        "def count_vowels(s):\n    n = 0\n    for c in s:\n        n += c in 'aeiou'\n    return n\n",
        "import builtins\nfor n in ('sum', 'abs', 'AssertionError'):\n    delattr(builtins, n)\n"
        "def count_vowels(s):\n    return 0\n",
    ),
    "stdlib_module_patched": (
        "hypot",
        "import math, sys\nmath.isclose = lambda *a, **k: False\nsys.modules['math'] = None\n"
        "def hypot(a, b):\n    return (a * a + b * b) ** 0.5\n",
        "import math, sys\nmath.isclose = lambda *a, **k: True\nsys.modules['math'] = None\n"
        "def hypot(a, b):\n    return 0.0\n",
    ),
    "stdlib_module_file_planted": (
        "hypot",
        "import os\nfor d in ('.', '/tmp', '..'):\n    try: open(os.path.join(d, 'math.py'), 'w').write('isclose = lambda *a, **k: False')\n"
        "    except OSError: pass\ndef hypot(a, b):\n    return (a * a + b * b) ** 0.5\n",
        "import os\nfor d in ('.', '/tmp', '..'):\n    try: open(os.path.join(d, 'math.py'), 'w').write('isclose = lambda *a, **k: True')\n"
        "    except OSError: pass\ndef hypot(a, b):\n    return 0.0\n",
    ),
}
