"""Credentials out of what is shown: a URL's ``user:password@`` never reaches a user or a log.

Settings name the farm's Redis and storage by URL, and such URLs may carry a password
(``redis://:secret@host:6379/0``). Every message that may quote one (errors of the broker and
the registry, what the command line prints, what the gateway answers) passes through
:func:`redact`.
"""

from __future__ import annotations

import re
from typing import Final

_CREDENTIALS: Final = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s]*@", re.IGNORECASE)


def redact(message: str) -> str:
    """``redis://:secret@host`` -> ``redis://***@host``, wherever a URL carries credentials."""
    return _CREDENTIALS.sub(r"\g<scheme>***@", message)
