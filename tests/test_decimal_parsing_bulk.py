"""The numba decimal parser against ``float()`` on a large seeded sample (slow tier)."""

from __future__ import annotations

import math
import random
import struct

import pytest

from tests.test_decimal_parsing import assert_float_or_refused

pytestmark = pytest.mark.slow


def test_many_random_decimal_strings_convert_exactly() -> None:
    # 300,000 seeded strings: random bit patterns printed in full, and 1-24 digit
    # mantissas with fractions and exponents across the whole float64 range
    rng = random.Random(20261203)
    accepted = 0
    for _ in range(300_000):
        if rng.random() < 0.4:
            x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
            if not math.isfinite(x):
                continue
            text = repr(x)
        else:
            text = rng.choice(("", "-")) + str(rng.randint(1, 9)) + "".join(
                rng.choice("0123456789") for _ in range(rng.randint(0, 23)))
            if rng.random() < 0.7:
                cut = rng.randint(1 + text.startswith("-"), len(text))
                text = text[:cut] + "." + (text[cut:] or "0")
            if rng.random() < 0.6:
                text += f"e{rng.randint(-345, 345)}"
        accepted += assert_float_or_refused(text)
    assert accepted > 250_000  # refusals are the rare cases, not the rule
