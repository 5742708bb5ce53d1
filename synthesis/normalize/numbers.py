"""Numbers as English words, through num2words: cardinals, ordinals, years, decimals, digits.

Every function takes the digits as written (``"1,234"``, ``"007"``) and returns words only, so
that espeak-ng never reads a number a second time.
"""

from __future__ import annotations

from typing import Final

from num2words import num2words

MAX_CARDINAL_DIGITS: Final = 15
"""Longer runs of digits (account numbers, ISBNs) are read digit by digit."""

DIGIT_WORDS: Final = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

_PLURAL_ENDINGS: Final = (("y", "ies"), ("x", "xes"), ("", "s"))
"""How the last word of a number takes a plural: twenty -> twenties, six -> sixes, ten -> tens."""


def _tidy(words: str, american: bool) -> str:
    # num2words writes "one million, two hundred and three": the commas would make pauses, and
    # American readers leave out the "and" (as espeak-ng's en-us voice does for digits).
    words = words.replace(",", "")
    if american:
        words = words.replace(" and ", " ")
    return words


def _integer(digits: str) -> int:
    return int(digits.replace(",", ""))


def digits(digits: str) -> str:
    """Each digit as a word: ``"4567"`` -> ``"four five six seven"``."""
    return " ".join(DIGIT_WORDS[int(d)] for d in digits if d.isdigit())


def cardinal(digits_: str, american: bool = True) -> str:
    """``"1,234"`` -> ``"one thousand two hundred thirty-four"``; leading zeros and very long
    numbers are read digit by digit."""
    plain = digits_.replace(",", "")
    if (len(plain) > 1 and plain.startswith("0")) or len(plain) > MAX_CARDINAL_DIGITS:
        return digits(plain)
    return _tidy(num2words(int(plain), lang="en"), american)


def ordinal(digits_: str, american: bool = True) -> str:
    """``"3"`` -> ``"third"``, ``"21"`` -> ``"twenty-first"``."""
    return _tidy(num2words(_integer(digits_), lang="en", to="ordinal"), american)


def year(digits_: str, american: bool = True) -> str:
    """``"1984"`` -> ``"nineteen eighty-four"``, ``"1905"`` -> ``"nineteen oh five"``,
    ``"2005"`` -> ``"two thousand five"``."""
    return _tidy(num2words(_integer(digits_), lang="en", to="year"), american).replace("oh-", "oh ")


def decimal(whole: str, fraction: str, american: bool = True) -> str:
    """``("3", "14")`` -> ``"three point one four"``; an empty whole part is not read."""
    head = cardinal(whole, american) + " " if whole else ""
    return f"{head}point {digits(fraction)}"


def number(text: str, american: bool = True) -> str:
    """An integer or a decimal as written: ``"2.5"``, ``"1,000"``, ``"12"``."""
    whole, _, fraction = text.partition(".")
    return decimal(whole, fraction, american) if fraction else cardinal(whole, american)


def plural(words: str) -> str:
    """The number words as a plural noun: ``"nineteen ninety"`` -> ``"nineteen nineties"``."""
    for ending, replacement in _PLURAL_ENDINGS:
        if words.endswith(ending):
            return words[: len(words) - len(ending)] + replacement
    raise AssertionError("the last ending matches every word")
