"""The word lists English reading uses: months, currencies, units, abbreviations, regnal names."""

from __future__ import annotations

from typing import Final, NamedTuple

MONTHS: Final = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
MONTH_ABBREVIATIONS: Final = {
    "Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "Jun": 6, "Jul": 7,
    "Aug": 8, "Sep": 9, "Sept": 9, "Oct": 10, "Nov": 11, "Dec": 12,
}  # fmt: skip


class Currency(NamedTuple):
    one: str
    many: str
    cent: str | None
    cents: str | None


CURRENCIES: Final = {
    "$": Currency("dollar", "dollars", "cent", "cents"),
    "£": Currency("pound", "pounds", "penny", "pence"),
    "€": Currency("euro", "euros", "cent", "cents"),
    "¥": Currency("yen", "yen", None, None),
    "₹": Currency("rupee", "rupees", "paisa", "paise"),
}
SCALES: Final = {
    "thousand": "thousand", "k": "thousand", "K": "thousand",
    "million": "million", "m": "million", "M": "million", "mn": "million",
    "billion": "billion", "b": "billion", "bn": "billion", "B": "billion",
    "trillion": "trillion", "tn": "trillion",
}  # fmt: skip
"""Words and letters that scale an amount of money: ``$5m``, ``$2.5 billion``."""


class Unit(NamedTuple):
    one: str
    many: str


UNITS: Final = {
    "km/h": Unit("kilometer per hour", "kilometers per hour"),
    "kph": Unit("kilometer per hour", "kilometers per hour"),
    "mph": Unit("mile per hour", "miles per hour"),
    "m/s": Unit("meter per second", "meters per second"),
    "km": Unit("kilometer", "kilometers"),
    "cm": Unit("centimeter", "centimeters"),
    "mm": Unit("millimeter", "millimeters"),
    "nm": Unit("nanometer", "nanometers"),
    "mi": Unit("mile", "miles"),
    "ft": Unit("foot", "feet"),
    "yd": Unit("yard", "yards"),
    "kg": Unit("kilogram", "kilograms"),
    "mg": Unit("milligram", "milligrams"),
    "lb": Unit("pound", "pounds"),
    "lbs": Unit("pound", "pounds"),
    "oz": Unit("ounce", "ounces"),
    "ml": Unit("milliliter", "milliliters"),
    "mL": Unit("milliliter", "milliliters"),
    "°C": Unit("degree Celsius", "degrees Celsius"),
    "°F": Unit("degree Fahrenheit", "degrees Fahrenheit"),
    "°": Unit("degree", "degrees"),
    "KB": Unit("kilobyte", "kilobytes"),
    "kB": Unit("kilobyte", "kilobytes"),
    "MB": Unit("megabyte", "megabytes"),
    "GB": Unit("gigabyte", "gigabytes"),
    "TB": Unit("terabyte", "terabytes"),
    "Hz": Unit("hertz", "hertz"),
    "kHz": Unit("kilohertz", "kilohertz"),
    "MHz": Unit("megahertz", "megahertz"),
    "GHz": Unit("gigahertz", "gigahertz"),
    "kW": Unit("kilowatt", "kilowatts"),
    "kWh": Unit("kilowatt hour", "kilowatt hours"),
    "ms": Unit("millisecond", "milliseconds"),
    "sec": Unit("second", "seconds"),
    "min": Unit("minute", "minutes"),
    "hr": Unit("hour", "hours"),
    "hrs": Unit("hour", "hours"),
}
"""Units read after a number, with or without a space between: ``5 kg``, ``10km``."""

ATTACHED_UNITS: Final = {
    "m": Unit("meter", "meters"),
    "g": Unit("gram", "grams"),
    "h": Unit("hour", "hours"),
    "l": Unit("liter", "liters"),
    "L": Unit("liter", "liters"),
    "W": Unit("watt", "watts"),
    "V": Unit("volt", "volts"),
}
"""Units read only when written against the number (``100m``, ``5g``): after a space the
letter is too often a word or an initial (``5 m`` may be a list's item ``m``)."""

ABBREVIATIONS: Final = {
    "Mr.": "Mister",
    "Mrs.": "Missus",
    "Ms.": "Miz",
    "Prof.": "Professor",
    "Gen.": "General",
    "Col.": "Colonel",
    "Capt.": "Captain",
    "Lt.": "Lieutenant",
    "Sgt.": "Sergeant",
    "Rev.": "Reverend",
    "Hon.": "Honorable",
    "Mt.": "Mount",
    "Ft.": "Fort",
}
"""Titles, always followed by a name: never at the end of a sentence."""

FINAL_ABBREVIATIONS: Final = {
    "Jr.": "Junior",
    "Sr.": "Senior",
    "Ave.": "Avenue",
    "Rd.": "Road",
    "Blvd.": "Boulevard",
    "Inc.": "Incorporated",
    "Ltd.": "Limited",
    "etc.": "et cetera",
    "et al.": "and others",
}
"""Abbreviations that may end a sentence: their full stop is kept there."""

INLINE_ABBREVIATIONS: Final = {
    "e.g.": "for example",
    "i.e.": "that is",
    "vs.": "versus",
    "cf.": "compare",
    "approx.": "approximately",
}
"""Abbreviations inside a sentence, in any case (``E.g.`` starting one)."""

NUMBERED_ABBREVIATIONS: Final = {
    "No.": "number",
    "Nos.": "numbers",
    "no.": "number",
    "Fig.": "figure",
    "fig.": "figure",
    "Vol.": "volume",
    "vol.": "volume",
    "Ch.": "chapter",
    "ch.": "chapter",
    "p.": "page",
    "pp.": "pages",
    "#": "number",
}
"""Abbreviations read as words only before a number (``No. 5``); ``No.`` alone is a reply."""

CARDINAL_TITLES: Final = frozenset(
    {
        "chapter", "part", "book", "volume", "act", "scene", "section", "phase", "stage", "level",
        "type", "class", "article", "appendix", "episode", "season", "round", "war", "mark", "vol",
        "ch", "chapters", "parts", "title", "canto", "psalm", "stanza", "apollo", "gemini",
    }
)  # fmt: skip
"""Words after which a Roman numeral is a plain number: Chapter IV, World War II, Part I."""

REGNAL_NAMES: Final = frozenset(
    {
        "Alexander", "Alfonso", "Amenhotep", "Anne", "Antiochus", "Benedict", "Boniface", "Carlos",
        "Catherine", "Charles", "Christian", "Clement", "Constantine", "Cyrus", "Darius", "David",
        "Edward", "Elizabeth", "Ferdinand", "Francis", "Frederick", "Friedrich", "George", "Gregory",
        "Gustav", "Gustavus", "Harald", "Henry", "Innocent", "Ivan", "James", "John", "Juan", "Julius",
        "Justinian", "Leo", "Leopold", "Louis", "Ludwig", "Mary", "Matilda", "Mehmed", "Murad",
        "Napoleon", "Nicholas", "Olaf", "Otto", "Paul", "Peter", "Philip", "Pius", "Ptolemy",
        "Ramesses", "Richard", "Robert", "Rudolf", "Selim", "Sixtus", "Stephen", "Suleiman",
        "Thutmose", "Urban", "Victor", "Victoria", "Wilhelm", "William", "Xerxes",
    }
)  # fmt: skip
"""Names after which even a one-letter numeral (I, V, X) is a regnal number: Henry V, Pius X.
After any other word ``I`` stays the pronoun."""
