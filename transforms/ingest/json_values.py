"""The ``.json`` reader: an array of records, or JSON values back to back, streamed.

The file is decoded in chunks into a buffer (``_JsonStream``) and each value is decoded with
``json.JSONDecoder.raw_decode`` at its position, so memory stays at about one record plus a
chunk. A malformed value is skipped up to the next ``,``/``]`` at its bracket depth (inside an
array) or the end of its line (outside one), tracking strings and brackets, and yielded as a
failed record with its line and column; bytes that are not UTF-8 are carried as surrogates
and shown as ``\\xNN`` escapes. Problems with the file as a whole (an array never closed,
data after it) raise ``InputError``.

What it does NOT guard against: a single value is held in memory whole, however large.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import IO

from tasksieve.transforms.ingest.files import InputError
from tasksieve.transforms.ingest.records import SourceRecord, failed, open_bytes, record_of

_CHUNK = 1 << 16
_BOM = "\ufeff"
_WS = re.compile(r"[ \t\r\n]*")
_SURROGATE = re.compile("[\udc80-\udcff]")
_IN_STRING = re.compile(r'["\\]')
_OUTSIDE = re.compile(r'["\[\]{},\n]')


def _clean(text: str) -> str:
    """Turn bytes smuggled in as surrogates back into visible ``\\xNN`` escapes."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _ends_value(ch: str, in_array: bool, consumed: bool) -> bool:
    """Whether ``ch`` at bracket depth 0 ends a malformed value being skipped."""
    return ch in ",]" if in_array else (ch == "\n" and consumed)


class _JsonStream:
    """A text buffer over a byte stream, filled in chunks, with absolute line numbers."""

    def __init__(self, f: IO[bytes], path: str) -> None:
        self.f, self.path = f, path
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.line = 1  # line number of buf[self.mark]
        self.mark = 0
        self.col_base = 0  # characters of buf[0]'s line that were dropped by compact()
        self.raw_decode = json.JSONDecoder().raw_decode

    def more(self) -> bool:
        """Append the next chunk (bigger when the buffer is big); False at end of file."""
        if self.eof:
            return False
        data = self.f.read(max(_CHUNK, len(self.buf) - self.pos))
        if not data:
            self.eof = True
            self.buf += self.decoder.decode(b"", final=True)
            return False
        self.buf += self.decoder.decode(data)
        return True

    def line_at(self, pos: int) -> int:
        """Absolute line of buffer position ``pos`` (positions must not go backwards)."""
        self.line += self.buf.count("\n", self.mark, pos)
        self.mark = pos
        return self.line

    def where(self, start: int, start_line: int, pos: int) -> str:
        """'line L column C' of buffer position ``pos``, given the line of ``start``."""
        line = start_line + self.buf.count("\n", start, pos)
        nl = self.buf.rfind("\n", 0, pos)
        col = pos - nl if nl >= 0 else pos + 1 + self.col_base
        return f"line {line} column {col}"

    def here(self) -> str:
        """'line L column C' of the current position."""
        return self.where(self.pos, self.line_at(self.pos), self.pos)

    def compact(self) -> None:
        """Drop consumed text once it is large, keeping line and column bookkeeping."""
        if self.pos < _CHUNK:
            return
        self.line_at(self.pos)
        nl = self.buf.rfind("\n", 0, self.pos)
        self.col_base = self.col_base + self.pos if nl < 0 else self.pos - nl - 1
        self.buf = self.buf[self.pos :]
        self.mark -= self.pos
        self.pos = 0

    def peek(self) -> str:
        """Skip whitespace and return the next character ("" at end of file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def element(self, in_array: bool, pending: str | None) -> SourceRecord:
        """Decode one value at the current position into a record; resync after a bad one."""
        self.compact()
        start = self.pos
        line = self.line_at(start)
        while True:
            try:
                value, end = self.raw_decode(self.buf, start)
            except json.JSONDecodeError as e:
                near_end = e.pos >= len(self.buf) - 8 or e.msg.startswith("Unterminated")
                if near_end and self.more():
                    continue
                where = self.where(start, line, e.pos)
                return self._skip_bad(start, line, f"invalid JSON: {e.msg} at {where}", in_array)
            if end >= len(self.buf) and self.more():
                continue  # a number or literal may go on in the next chunk
            break
        self.pos = end
        text = self.buf[start:end]
        bad = _SURROGATE.search(text)
        if bad:
            byte = ord(bad.group()) - 0xDC00
            where = self.where(start, line, start + bad.start())
            msg = f"not UTF-8 (byte 0x{byte:02x} at {where})"
            return failed(self.path, line, msg, _clean(text))
        if pending:
            return failed(self.path, line, pending, text)
        return record_of(self.path, line, value, text)

    def _skip_bad(self, start: int, line: int, error: str, in_array: bool) -> SourceRecord:
        """Skip a malformed value (brackets and strings tracked) and return it as a failure."""
        depth, pos, in_str = 0, start, False
        while True:
            pattern = _IN_STRING if in_str else _OUTSIDE
            m = pattern.search(self.buf, pos)
            if m is None:
                if not self.more():
                    pos = len(self.buf)
                    break
                continue
            ch, pos = m.group(), m.start()
            if in_str:
                if ch == "\\":
                    if pos + 1 >= len(self.buf) and self.more():
                        continue
                    pos += 2
                    continue
                in_str, pos = False, pos + 1
            elif ch == '"':
                in_str, pos = True, pos + 1
            elif ch in "[{":
                depth, pos = depth + 1, pos + 1
            elif ch in "]}" and depth > 0:
                depth, pos = depth - 1, pos + 1
                if depth == 0 and not in_array:
                    break
            elif depth == 0 and _ends_value(ch, in_array, pos > start):
                break
            else:
                pos += 1
        if pos == start and not in_array:
            pos = start + 1  # always make progress outside arrays
        self.pos = min(pos, len(self.buf))
        # whitespace up to the delimiter that ended the value is not part of the record
        return failed(self.path, line, error, _clean(self.buf[start : self.pos].rstrip(" \t\r\n")))


def iter_json(path: str) -> Iterator[SourceRecord]:
    """The records of one ``.json`` file (see the module docstring)."""
    with open_bytes(path) as f:
        s = _JsonStream(f, path)
        c = s.peek()
        if c == _BOM:
            s.pos += 1
            c = s.peek()
        if c != "[":  # one object, or several back to back (JSON Lines saved as .json)
            while c:
                yield s.element(False, None)
                c = s.peek()
            return
        s.pos += 1
        if s.peek() == "]":
            s.pos += 1
            _expect_end(s)
            return
        pending: str | None = None
        while True:
            yield s.element(True, pending)
            pending = None
            c = s.peek()
            if c == ",":
                s.pos += 1
                nxt = s.peek()
                if nxt == "":
                    raise InputError(f"{path}: JSON array is not closed with ']' (truncated file?)")
                if nxt == "]":
                    raise InputError(f"{path}: invalid JSON array: ',' before ']' at {s.here()}")
            elif c == "]":
                s.pos += 1
                _expect_end(s)
                return
            elif c == "":
                raise InputError(f"{path}: JSON array is not closed with ']' (truncated file?)")
            else:
                pending = f"invalid JSON: missing ',' before {s.here()}"


def _expect_end(s: _JsonStream) -> None:
    if s.peek():
        raise InputError(f"{s.path}: unexpected data after the JSON array at {s.here()}")
