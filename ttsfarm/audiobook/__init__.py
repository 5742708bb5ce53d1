"""The audiobook feature: a book (CSV, EPUB, text, Markdown) read into parts, each part rendered
(in this process or as a farm job), cached, then chapters assembled, mastered and exported.

``builder`` drives it; ``source`` picks the reader; ``render`` is the one hook to whatever makes
the audio.
"""
