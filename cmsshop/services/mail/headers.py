"""Header values made from text a user or an admin typed, made safe before ``email``.

A ticket's subject, a product's name, the site name and an account's address all end up
in From, To or Subject. Two things in such text can become headers of their own:

- a line break: CR and LF, and every other character some reader breaks a line on (the
  C0 and C1 controls, U+2028 and U+2029);
- an RFC 2047 encoded word (``=?utf-8?q?=0D=0A...?=``): the e-mail library parses header
  values as if they were already encoded, decodes the word, and some Python versions
  (before 3.11.10 and 3.12.5) fold the decoded CR LF into the message as it is, so the
  word becomes headers and body text of the attacker's choosing.

Neither is ever meant by a person, so text loses both (a control becomes a space,
``=?`` becomes ``= ?``) whatever the interpreter; an address cannot be changed without
changing the recipient, so one carrying either is refused.

A display name (the site name in From) also loses the RFC 5322 specials but the dot:
the same versions drop the quotes around a display name when they fold a long From
line, and ``"Shop, Inc." <noreply@...>`` then reads as two addresses.
"""

from __future__ import annotations

import contextlib
import re
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.utils import formataddr, parseaddr

LINE_BREAKING = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
SPECIALS = re.compile(r'[()<>\[\]:;@\\,"]')


class UnsafeAddress(ValueError):
    """An address that would not stay one address in a header."""


def header_text(value: str) -> str:
    """``value`` as one line of plain text in a header: no control or line separator,
    no encoded word, runs of white space as one space."""
    text = LINE_BREAKING.sub(" ", value).replace("=?", "= ?")
    # Splitting on white space never brings "=" and "?" together again.
    return " ".join(text.split())


def header_address(address: str) -> str:
    """``address`` for a header, unchanged; :class:`UnsafeAddress` if it holds a line
    break, white space or an encoded word."""
    if not address or header_text(address) != address or " " in address:
        raise UnsafeAddress(f"unsafe address for a mail header: {address!r}")
    return address


def header_mailbox(mailbox: str) -> str:
    """A ``Name <address>`` header value (From) with the name made plain text and the
    address checked."""
    name, address = parseaddr(mailbox)
    # A non-ASCII name arrives encoded (formataddr in the settings): read it as text
    # first; whatever the decoding yields is made plain below.
    # Not a valid encoded word: plain text, neutralised below.
    with contextlib.suppress(HeaderParseError, LookupError, UnicodeError):
        name = str(make_header(decode_header(name))) if "=?" in name else name
    return formataddr((header_text(SPECIALS.sub(" ", name)), header_address(address)))
