"""English text as it is read aloud: numbers, money, dates, times, units and abbreviations
written out in words before espeak-ng turns them into phonemes.

The rules run in order, most specific first (a phone number before a range, a date before a
year, money before a plain number). Each writes words only, never digits, so no later rule and
not espeak-ng reads a number twice. Digits no rule claims (``MP3``, ``A4``) stay for espeak-ng,
which reads them digit by digit or as a number.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Final

from synthesis.normalize import numbers as n
from synthesis.normalize import patterns as p
from synthesis.normalize.words import (
    ABBREVIATIONS,
    ATTACHED_UNITS,
    CARDINAL_TITLES,
    CURRENCIES,
    FINAL_ABBREVIATIONS,
    INLINE_ABBREVIATIONS,
    MONTHS,
    NUMBERED_ABBREVIATIONS,
    REGNAL_NAMES,
    SCALES,
    UNITS,
    Unit,
)

Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]

_BARE_YEARS: Final = range(1100, 2000)
"""Four digits without a comma read as a year even without a word that says so (``1850``)."""
_ADDRESS_SYMBOLS: Final = {
    ".": "dot", "/": "slash", "@": "at", "-": "dash", "_": "underscore", ":": "colon",
    "?": "question mark", "=": "equals", "&": "and", "+": "plus", "~": "tilde", "#": "hash",
}  # fmt: skip
_FRACTION_NAMES: Final = {2: ("half", "halves"), 4: ("quarter", "quarters")}
_MAX_DENOMINATOR: Final = 16
_OPERATORS: Final = {"+": " plus ", "=": " equals ", "\u00d7": " times "}
_ROMAN: Final = re.compile(r"X{0,3}(IX|IV|V?I{0,3})")
_ROMAN_VALUES: Final = {"I": 1, "V": 5, "X": 10}
_SENTENCE_GOES_ON: Final = re.compile(r"\s+[A-Z]|\s*$")


def _ends_sentence(match: re.Match[str]) -> str:
    """``"."`` where the full stop of the abbreviation just read also ended its sentence."""
    return "." if _SENTENCE_GOES_ON.match(match.string, match.end()) else ""


def _roman(numeral: str) -> int | None:
    if not numeral or not _ROMAN.fullmatch(numeral):
        return None
    values = [_ROMAN_VALUES[c] for c in numeral]
    return sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))


def spell_address(address: str) -> str:
    """A URL or an email address as read: words, ``dot``, ``slash``, ``at``, digits one by one."""
    address = re.sub(r"^(?i:https?://)", "", address).rstrip("/")
    spoken = []
    for token in re.findall(r"[^\W\d_]+|\d+|.", address):
        if token.isdigit():
            spoken.append(n.digits(token))
        elif token.lower() == "www":
            spoken.append("W W W")
        elif token[0].isalpha():
            spoken.append(token.lower())
        elif token in _ADDRESS_SYMBOLS:
            spoken.append(_ADDRESS_SYMBOLS[token])
    return " ".join(spoken)


class EnglishReader:
    """Writes out English text as it is read aloud. ``american`` leaves the "and" out of numbers
    ("one hundred twenty-three") and reads ISO and slashed dates month first."""

    def __init__(self, american: bool = True) -> None:
        self.american = american
        self._rules = self._make_rules()

    def __call__(self, text: str) -> str:
        if not text.isascii():  # NFKC, as the segmenter does: "½" becomes 1, fraction slash, 2
            text = unicodedata.normalize("NFKC", text)
        for pattern, read in self._rules:
            text = pattern.sub(read, text)
        return text

    # ------------------------------------------------------------------------ number words

    def _number(self, digits: str) -> str:
        if "," not in digits and "." not in digits and int(digits) in _BARE_YEARS:
            return n.year(digits, self.american)
        return n.number(digits, self.american)

    def _year(self, digits: str) -> str:
        return n.year(digits, self.american)

    def _date(self, month: int, day: str, year: str | None, month_first: bool) -> str:
        day_words = n.ordinal(day, self.american)
        name = MONTHS[month - 1]
        said = f"{name} {day_words}" if month_first else f"the {day_words} of {name}"
        return f"{said}, {self._year(year)}" if year else said

    # ------------------------------------------------------------------------ the rules

    def _make_rules(self) -> list[Rule]:
        return [
            (p.URL, lambda m: spell_address(m[0])),
            (p.EMAIL, lambda m: spell_address(m[0])),
            (p.PHONE_INTERNATIONAL, self._phone),
            (p.PHONE, self._phone),
            (p.NUMBERED_ABBREVIATION, lambda m: NUMBERED_ABBREVIATIONS[m[1]] + " "),
            (p.TITLE, lambda m: ABBREVIATIONS[m[1]]),
            (p.STREET_AT_END, self._street),
            (p.BEFORE_NAME, lambda m: "Doctor" if m[1] == "Dr" else "Saint"),
            (p.STREET, self._street),
            (p.DOCTOR, lambda m: "Doctor"),
            (p.FINAL_ABBREVIATION, lambda m: FINAL_ABBREVIATIONS[m[1]] + _ends_sentence(m)),
            (p.INLINE_ABBREVIATION, lambda m: INLINE_ABBREVIATIONS[m[1].lower()]),
            (p.ISO_DATE, self._iso_date),
            (p.SLASHED_DATE, self._slashed_date),
            (p.MONTH_DAY, self._month_day),
            (p.DAY_MONTH, self._day_month),
            (p.MONTH_YEAR, lambda m: f"{MONTHS[p.MONTH_NUMBERS[m[1]] - 1]} {self._year(m[2])}"),
            (p.TIME, self._time),
            (p.DOTTED_TIME, self._time),
            (p.HOUR, self._hour),
            (p.MINUS, lambda m: "minus "),
            (p.OPERATOR, lambda m: _OPERATORS[m[1]]),
            (p.BY, lambda m: " by "),
            (p.MONEY, self._money),
            (p.PERCENT, lambda m: f"{self._plain(m[1])} percent"),
            (p.UNIT, self._unit),
            (p.ATTACHED_UNIT, self._unit),
            (p.DECADE, self._decade),
            (p.ORDINAL, lambda m: n.ordinal(m[1], self.american)),
            (p.YEAR_RANGE, lambda m: f"{self._year(m[1])} to {self._year(m[2])}"),
            (p.YEAR_IN_WORDS, lambda m: f"{m[1]}{m[2]}{self._year(m[3])}"),
            (p.ERA, lambda m: f"{self._year(m[1])} {m[2].replace('.', '')}"),
            (p.RANGE, lambda m: f"{self._plain(m[1])} to {self._plain(m[2])}"),
            (p.ROMAN_AFTER_WORD, self._regnal),
            (p.FRACTION, self._fraction),
            (p.VERSION, lambda m: " point ".join(map(n.cardinal, m[0].split(".")))),
            (p.DECIMAL, lambda m: n.decimal(m[1] or "", m[2], self.american)),
            (p.CARDINAL, lambda m: self._number(m[1])),
            (p.AMPERSAND, lambda m: " and "),
            (p.SPACES, lambda m: " "),
        ]

    def _street(self, match: re.Match[str]) -> str:
        return ("Drive" if match[1] == "Dr" else "Street") + _ends_sentence(match)

    def _phone(self, match: re.Match[str]) -> str:
        groups = [n.digits(group) for group in re.findall(r"\d+", match[0])]
        return ("plus " if match[0].startswith("+") else "") + ", ".join(groups)

    def _iso_date(self, match: re.Match[str]) -> str:
        year, month, day = match[1], int(match[2]), match[3]
        if not 1 <= month <= 12 or not 1 <= int(day) <= 31:
            return match[0]
        return self._date(month, day, year, self.american)

    def _slashed_date(self, match: re.Match[str]) -> str:
        first, second, year = int(match[1]), int(match[2]), match[3]
        month, day = (first, second) if self.american else (second, first)
        if month > 12:
            month, day = day, month
        if not 1 <= month <= 12 or not 1 <= day <= 31:
            return match[0]
        return self._date(month, str(day), year, self.american)

    def _month_day(self, match: re.Match[str]) -> str:
        if not 1 <= int(match[2]) <= 31:
            return match[0]
        return self._date(p.MONTH_NUMBERS[match[1]], match[2], match[3], month_first=True)

    def _day_month(self, match: re.Match[str]) -> str:
        if not 1 <= int(match[1]) <= 31:
            return match[0]
        said = self._date(p.MONTH_NUMBERS[match[2]], match[1], match[3], month_first=False)
        after_the = match.string[max(0, match.start() - 4) : match.start()].lower() == "the "
        return said.removeprefix("the ") if after_the else said

    def _time(self, match: re.Match[str]) -> str:
        hour, minute, second, half, stop = match[1], int(match[2]), match[3], match[4], match[5]
        said = n.cardinal(str(int(hour)), self.american)
        if minute == 0:
            if not half:
                said += " o'clock" if int(hour) <= 12 else " hundred"
        elif minute < 10:
            said += f" oh {n.cardinal(str(minute))}"
        else:
            said += f" {n.cardinal(str(minute), self.american)}"
        if second:
            said += f" and {n.cardinal(str(int(second)))} seconds"
        if half:
            said += f" {half.upper()}M" + (_ends_sentence(match) if stop else "")
        return said

    def _hour(self, match: re.Match[str]) -> str:
        stop = _ends_sentence(match) if match[3] else ""
        return f"{n.cardinal(str(int(match[1])))} {match[2].upper()}M{stop}"

    def _plain(self, number: str) -> str:
        return n.number(number, self.american)

    def _money(self, match: re.Match[str]) -> str:
        currency, whole, fraction, scale = CURRENCIES[match[1]], match[2], match[3], match[4]
        if scale:
            amount = whole + ("." + fraction if fraction else "")
            return f"{self._plain(amount)} {SCALES[scale]} {currency.many}"
        if fraction and len(fraction) == 2 and currency.cent and currency.cents:
            units, cents = int(whole.replace(",", "")), int(fraction)
            said = []
            if units or not cents:
                said.append(
                    f"{n.cardinal(whole, self.american)} {currency.one if units == 1 else currency.many}"
                )
            if cents:
                said.append(f"{n.cardinal(str(cents))} {currency.cent if cents == 1 else currency.cents}")
            return " and ".join(said)
        amount = whole + ("." + fraction if fraction else "")
        return f"{self._plain(amount)} {currency.one if amount == '1' else currency.many}"

    def _unit(self, match: re.Match[str]) -> str:
        unit: Unit = UNITS.get(match[2]) or ATTACHED_UNITS[match[2]]
        return f"{self._plain(match[1])} {unit.one if match[1] == '1' else unit.many}"

    def _decade(self, match: re.Match[str]) -> str:
        century, decade, short, bare = match[1], match[2], match[3], match[4]
        if century:
            return n.plural(self._year(f"{century}{decade}0"))
        return n.plural(n.cardinal((short or bare) + "0"))

    def _regnal(self, match: re.Match[str]) -> str:
        name, numeral = match[1], match[2]
        value = _roman(numeral)
        if value is None:
            return match[0]
        if name.lower() in CARDINAL_TITLES:
            return f"{name} {n.cardinal(str(value))}"
        if len(numeral) == 1 and name not in REGNAL_NAMES:
            return match[0]  # "Then I": the pronoun
        return f"{name} the {n.ordinal(str(value))}"

    def _fraction(self, match: re.Match[str]) -> str:
        whole, top, slash, bottom = match[1], match[2], match[3], match[4]
        if slash == "\u2044" and not whole and len(top) > 1:  # NFKC made "2½" into "21", fraction slash, "2"
            whole, top = top[:-1], top[-1]
        numerator, denominator = int(top), int(bottom)
        if (numerator, denominator) == (24, 7):
            return "twenty-four seven"
        if not 0 < numerator < denominator <= _MAX_DENOMINATOR:
            return match[0].replace("\u2044", "/") if not whole else match[0]
        one, many = _FRACTION_NAMES.get(denominator, (n.ordinal(bottom), n.ordinal(bottom) + "s"))
        said = f"{n.cardinal(top)} {one if numerator == 1 else many}"
        return f"{self._number(whole)} and {said}" if whole else said
