"""English reading: what is written, and what the voice is to say."""

from __future__ import annotations

import re

import pytest

from synthesis.normalize import EnglishReader, reader_for

AMERICAN = EnglishReader(american=True)
BRITISH = EnglishReader(american=False)

# (written, spoken by an en-us voice)
CASES: list[tuple[str, str]] = [
    # cardinals
    ("She had 3 cats.", "She had three cats."),
    (
        "There were 1,234,567 people.",
        "There were one million two hundred thirty-four thousand five hundred sixty-seven people.",
    ),
    ("About 250 of them came.", "About two hundred fifty of them came."),
    ("It was 0 degrees.", "It was zero degrees."),
    ("Agent 007 arrived.", "Agent zero zero seven arrived."),
    ("1,000 ships sailed.", "one thousand ships sailed."),
    ("Count 1, 2, 3.", "Count one, two, three."),
    ("It was -5 outside.", "It was minus five outside."),
    ("COVID-19 spread.", "COVID-nineteen spread."),
    # ordinals
    ("She came 3rd.", "She came third."),
    ("The 21st century began.", "The twenty-first century began."),
    ("His 100th birthday.", "His one hundredth birthday."),
    ("On the 2nd floor.", "On the second floor."),
    # decimals and fractions
    ("Pi is 3.14 or so.", "Pi is three point one four or so."),
    ("Only .5 remained.", "Only point five remained."),
    ("Version 1.2.3 shipped.", "Version one point two point three shipped."),
    ("Add 1/2 cup.", "Add one half cup."),
    ("Add 3/4 cup.", "Add three quarters cup."),
    ("Wait 2 1/2 hours.", "Wait two and one half hours."),
    ("Bake 2½ hours.", "Bake two and one half hours."),
    ("Open 24/7.", "Open twenty-four seven."),
    # money
    ("It costs $49.95 today.", "It costs forty-nine dollars and ninety-five cents today."),
    ("It costs $5.", "It costs five dollars."),
    ("Only $1 left.", "Only one dollar left."),
    ("Just $0.99 now.", "Just ninety-nine cents now."),
    ("I paid £5.", "I paid five pounds."),
    ("I paid €10.", "I paid ten euros."),
    ("A £1.50 fee.", "A one pound and fifty pence fee."),
    ("They raised $2.5 million.", "They raised two point five million dollars."),
    ("A $5m deal.", "A five million dollars deal."),
    ("It cost ¥500.", "It cost five hundred yen."),
    # percentages
    ("About 50% agreed.", "About fifty percent agreed."),
    ("Rates rose 2.5 %.", "Rates rose two point five percent."),
    # dates
    ("On 2024-03-15 we left.", "On March fifteenth, twenty twenty-four we left."),
    ("On March 15, 2024 we left.", "On March fifteenth, twenty twenty-four we left."),
    ("By March 3rd it was over.", "By March third it was over."),
    ("On 15 March 2024 we left.", "On the fifteenth of March, twenty twenty-four we left."),
    ("On the 4th of July.", "On the fourth of July."),
    ("Due 12/25/2024.", "Due December twenty-fifth, twenty twenty-four."),
    ("In May 2024 it rained.", "In May twenty twenty-four it rained."),
    ("On Dec. 7, 1941 it began.", "On December seventh, nineteen forty-one it began."),
    # times
    ("Be there at 8:00.", "Be there at eight o'clock."),
    ("Be there at 8:30 pm.", "Be there at eight thirty PM."),
    ("It starts at 8:05.", "It starts at eight oh five."),
    ("Leave at 10 a.m. sharp.", "Leave at ten AM sharp."),
    ("We met at 7pm.", "We met at seven PM."),
    ("The train leaves at 14:45.", "The train leaves at fourteen forty-five."),
    ("Dinner is at 7.30 pm.", "Dinner is at seven thirty PM."),
    # years and decades
    ("In 1984 he wrote.", "In nineteen eighty-four he wrote."),
    ("Born in 2005.", "Born in two thousand five."),
    ("Since 2010 it grew.", "Since twenty ten it grew."),
    ("The year 1066 mattered.", "The year ten sixty-six mattered."),
    ("In the 1990s it boomed.", "In the nineteen nineties it boomed."),
    ("In the 1900s.", "In the nineteen hundreds."),
    ("Back in the '80s.", "Back in the eighties."),
    ("She is in her 20s.", "She is in her twenties."),
    ("The war lasted 1939\u20131945.", "The war lasted nineteen thirty-nine to nineteen forty-five."),
    ("Rome fell in 476 AD.", "Rome fell in four seventy-six AD."),
    ("A ship of 1850 sank.", "A ship of eighteen fifty sank."),
    ("Read pages 10-20.", "Read pages ten to twenty."),
    # units
    ("He drove at 100 km/h.", "He drove at one hundred kilometers per hour."),
    ("It weighs 5 kg.", "It weighs five kilograms."),
    ("It weighs 1 kg.", "It weighs one kilogram."),
    ("We walked 10 km.", "We walked ten kilometers."),
    ("He ran 100m.", "He ran one hundred meters."),
    ("It was 30 °C.", "It was thirty degrees Celsius."),
    ("A 16 GB card.", "A sixteen gigabytes card."),
    ("Limit 55 mph.", "Limit fifty-five miles per hour."),
    # Roman numerals
    ("Henry VIII had wives.", "Henry the eighth had wives."),
    ("Louis XIV was king.", "Louis the fourteenth was king."),
    ("Elizabeth II spoke.", "Elizabeth the second spoke."),
    ("Henry V fought.", "Henry the fifth fought."),
    ("Then I went home.", "Then I went home."),
    ("So I said no.", "So I said no."),
    ("World War II ended.", "World War two ended."),
    ("Read Chapter IV.", "Read Chapter four."),
    ("Malcolm X spoke.", "Malcolm X spoke."),
    # abbreviations and initialisms
    ("Dr. Smith is here.", "Doctor Smith is here."),
    ("Mr. and Mrs. Brown came.", "Mister and Missus Brown came."),
    ("Ms. Lee agreed.", "Miz Lee agreed."),
    ("St. Paul lived on Elm St.", "Saint Paul lived on Elm Street."),
    ("They live at No. 5.", "They live at number five."),
    ("No. I will not.", "No. I will not."),
    ("Fruit, e.g. apples.", "Fruit, for example apples."),
    ("Food, i.e. bread.", "Food, that is bread."),
    ("Cats, dogs, etc.", "Cats, dogs, et cetera."),
    ("Smith vs. Jones.", "Smith versus Jones."),
    ("Acme Inc. The end.", "Acme Incorporated. The end."),
    ("The FBI and NASA agreed.", "The FBI and NASA agreed."),
    ("AT&T called.", "AT and T called."),
    ("It is #1.", "It is number one."),
    # phone numbers
    ("Call 555-123-4567 now.", "Call five five five, one two three, four five six seven now."),
    ("Call (555) 123-4567.", "Call five five five, one two three, four five six seven."),
    ("Dial 555-0199.", "Dial five five five, zero one nine nine."),
    ("Call +44 20 7946 0958.", "Call plus four four, two zero, seven nine four six, zero nine five eight."),
    # URLs and emails
    ("See https://example.com/books.", "See example dot com slash books."),
    ("Go to www.example.org today.", "Go to W W W dot example dot org today."),
    ("Mail john.doe@example.com now.", "Mail john dot doe at example dot com now."),
    # arithmetic
    ("So 2 + 2 = 4.", "So two plus two equals four."),
]


@pytest.mark.parametrize(("written", "spoken"), CASES, ids=[c[0] for c in CASES])
def test_english_is_read_aloud(written: str, spoken: str) -> None:
    assert AMERICAN(written) == spoken


def test_the_table_covers_enough() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize("written", [c[0] for c in CASES])
def test_no_number_is_read_twice(written: str) -> None:
    """Reading leaves words only, so reading again (or espeak-ng) finds nothing to expand."""
    once = AMERICAN(written)
    assert not re.search(r"\d", once)
    assert AMERICAN(once) == once


@pytest.mark.parametrize(
    ("written", "spoken"),
    [
        ("1250 desks", "twelve fifty desks"),
        ("2024 was long", "two thousand twenty-four was long"),
        ("Rocky IV", "Rocky the fourth"),
        ("Peter I", "Peter the first"),
        ("a $5m deal", "a five million dollars deal"),
        ("5 - 3", "five - three"),
        ("5 m away", "five m away"),
    ],
)
def test_the_guesses_docs_reading_owns_up_to(written: str, spoken: str) -> None:
    """The limits listed in docs/reading.md, so that the page stays true."""
    assert AMERICAN(written) == spoken


def test_digits_in_words_stay_for_espeak() -> None:
    assert AMERICAN("An MP3 on A4 paper.") == "An MP3 on A4 paper."


@pytest.mark.parametrize(
    ("written", "spoken"),
    [
        ("There were 123 of them.", "There were one hundred and twenty-three of them."),
        ("On 2024-03-15 we left.", "On the fifteenth of March, twenty twenty-four we left."),
        ("Due 25/12/2024.", "Due the twenty-fifth of December, twenty twenty-four."),
        ("Born in 2005.", "Born in two thousand and five."),
    ],
)
def test_british_reading(written: str, spoken: str) -> None:
    assert BRITISH(written) == spoken


@pytest.mark.parametrize("language", ["en-us", "en-gb-x-rp", "en", "en_GB", "EN-US"])
def test_english_voices_are_read(language: str) -> None:
    reader = reader_for(language)
    assert reader is not None
    assert reader("It costs $5.") == "It costs five dollars."


@pytest.mark.parametrize("language", ["de", "fr-fr", "es", "cmn", "eo", ""])
def test_other_languages_pass_through(language: str) -> None:
    assert reader_for(language) is None
