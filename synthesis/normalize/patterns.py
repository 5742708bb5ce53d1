"""The regular expressions of English reading, compiled once, in the order they run.

Each finds one kind of thing written for the eye; :class:`synthesis.normalize.english.EnglishReader`
says how each is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from synthesis.normalize.words import (
    ABBREVIATIONS,
    ATTACHED_UNITS,
    FINAL_ABBREVIATIONS,
    INLINE_ABBREVIATIONS,
    MONTH_ABBREVIATIONS,
    MONTHS,
    NUMBERED_ABBREVIATIONS,
    SCALES,
    UNITS,
)


def alternatives(words: Iterable[str]) -> str:
    """A regular expression matching any of ``words``, the longest first."""
    return "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))


INT: Final = r"\d{1,3}(?:,\d{3})+|\d+"
NUM: Final = rf"(?:{INT})(?:\.\d+)?"
START: Final = r"(?<![\w.])"
"""A number starts here: not inside a word or after a decimal point."""
END: Final = r"(?!\w|[.,]\d)"
"""A number ends here: no letter, and no decimal part or thousands group, follows."""
YEAR: Final = r"1\d{3}|20\d{2}"
DASH: Final = r"[-\u2013\u2014]"
APOSTROPHE: Final = r"['\u2019]"
HALF_DAY: Final = r"\s?([AaPp])\.?[Mm](\.?)"
"""am, p.m., PM: the letter, and the full stop that may end the sentence."""

MONTH_NUMBERS: Final = {name: number for number, name in enumerate(MONTHS, 1)} | MONTH_ABBREVIATIONS
MONTH: Final = f"({alternatives(MONTH_NUMBERS)})" + r"\.?"
YEAR_WORDS: Final = (
    r"(?i:in|since|by|from|until|till|to|of|year|circa|around|before|after|during|early|late|mid|"
    r"c\.|ca\.)"
)
"""Words after which four digits are a year: in 2010, since 1998, mid-1950."""

URL: Final = re.compile(r"\b(?:(?i:https?://)|www\.)[^\s<>\"']+?(?=[.,;:!?)\]]*(?:\s|$))")
EMAIL: Final = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
PHONE_INTERNATIONAL: Final = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]\(?\d{1,4}\)?){2,5}" + END)
PHONE: Final = re.compile(
    r"(?<![\w.-])(?:\(\d{3}\)\s?\d{3}[ .-]\d{4}|(?:1-)?\d{3}([.-])\d{3}\1\d{4}|\d{3}-\d{4})(?![\w-]|\.\d)"
)
"""(555) 123-4567, 555-123-4567, 555.123.4567, 1-800-555-1234, 555-0199."""

NUMBERED_ABBREVIATION: Final = re.compile(rf"(?<![\w.])({alternatives(NUMBERED_ABBREVIATIONS)})\s?(?=\d)")
TITLE: Final = re.compile(rf"(?<![\w.])({alternatives(ABBREVIATIONS)})(?=\s)")
STREET_AT_END: Final = re.compile(r"(?<=[A-Za-z] )(Dr|St)\.(?=\s*$)")
BEFORE_NAME: Final = re.compile(r"\b(Dr|St)\.?(?=\s+[A-Z])")
STREET: Final = re.compile(r"(?<=[a-z] )(Dr|St)\.")
DOCTOR: Final = re.compile(r"\bDr\.(?=\s)")
FINAL_ABBREVIATION: Final = re.compile(rf"(?<![\w.])({alternatives(FINAL_ABBREVIATIONS)})")
INLINE_ABBREVIATION: Final = re.compile(rf"(?<![\w.])({alternatives(INLINE_ABBREVIATIONS)})", re.IGNORECASE)

ISO_DATE: Final = re.compile(r"(?<![\w.-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\w-])")
SLASHED_DATE: Final = re.compile(r"(?<![\w/])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\w/])")
MONTH_DAY: Final = re.compile(rf"\b{MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+({YEAR}))?(?!\w|[.,:]\d)")
DAY_MONTH: Final = re.compile(rf"{START}(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}(?:,?\s+({YEAR}))?\b")
MONTH_YEAR: Final = re.compile(rf"\b{MONTH}\s+({YEAR})\b")

TIME: Final = re.compile(rf"(?<![\w:.])([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?(?:{HALF_DAY})?(?!\w|[:.]\d)")
DOTTED_TIME: Final = re.compile(rf"(?<![\w:.])(1[0-2]|0?[1-9])\.([0-5]\d)()(?:{HALF_DAY})(?!\w)")
"""8.30 pm, as British writing has it: a time only with am or pm after it."""
HOUR: Final = re.compile(rf"(?<![\w:.])(1[0-2]|0?[1-9]){HALF_DAY}(?!\w)")

MINUS: Final = re.compile(r"(?:(?<=\s)|^|(?<=\())[-\u2212](?=\d)")
OPERATOR: Final = re.compile(r"(?<=\d)\s?([+=\u00d7])\s?(?=\d)")
BY: Final = re.compile(r"(?<=\d)x(?=\d)")
"""1920x1080."""
MONEY: Final = re.compile(
    rf"(?<!\w)([$£€¥₹])\s?({INT})(?:\.(\d+))?(?:\s?({alternatives(SCALES)})(?!\w))?(?!\d)"
)
PERCENT: Final = re.compile(rf"{START}({NUM})\s?%")
UNIT: Final = re.compile(rf"{START}({NUM})\s?({alternatives(UNITS)})(?![\w/])")
ATTACHED_UNIT: Final = re.compile(rf"{START}({NUM})({alternatives(ATTACHED_UNITS)})(?![\w/])")
DECADE: Final = re.compile(
    rf"(?<![\w'\u2019])(?:(1\d|20)(\d)0|{APOSTROPHE}([1-9]?\d)0|([1-9])0){APOSTROPHE}?s\b"
)
"""1990s, 1900's, '80s, 20s."""
ORDINAL: Final = re.compile(rf"{START}({INT})(st|nd|rd|th|ST|ND|RD|TH)\b")
YEAR_RANGE: Final = re.compile(rf"{START}({YEAR})\s?{DASH}\s?({YEAR}|\d{{2}}){END}")
YEAR_IN_WORDS: Final = re.compile(rf"\b({YEAR_WORDS})([\s-])({YEAR}){END}")
ERA: Final = re.compile(r"(?<![\w.])(\d{1,4})\s?(AD|BC|BCE|CE|A\.D\.|B\.C\.)(?=\W|$)")
RANGE: Final = re.compile(rf"{START}({NUM})(?:-|\s?[\u2013\u2014]\s?)({NUM}){END}")
"""10-20, or 5 to 7 with an en dash; a hyphen only without spaces ("5 - 3" is a subtraction,
left as written)."""
ROMAN_AFTER_WORD: Final = re.compile(r"\b([A-Z][A-Za-z]+)\s+([IVX]+)\b(?!\.\w)")
FRACTION: Final = re.compile(rf"(?<![\w.,/])(?:({INT})\s)?(\d{{1,2}})([/\u2044])(\d{{1,2}})(?![\w/]|[.,]\d)")
VERSION: Final = re.compile(rf"{START}\d+(?:\.\d+){{2,}}{END}")
DECIMAL: Final = re.compile(rf"{START}({INT})?\.(\d+){END}")
CARDINAL: Final = re.compile(rf"{START}({INT}){END}")
AMPERSAND: Final = re.compile(r"\s?&\s?")
SPACES: Final = re.compile(r"  +")
