"""Integer arithmetic that tilings, kernels and the engine share: sizes rounded to blocks."""
from __future__ import annotations


def ceil_div(a: int, b: int) -> int:
    """How many b-sized pieces cover a."""
    return -(-a // b)


def align_up(a: int, b: int) -> int:
    """a rounded up to a multiple of b."""
    return -(-a // b) * b
