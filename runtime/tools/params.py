"""What a tool takes: each argument declared once, from which its parser and its schema both come.

A tool implementation declares its arguments as a tuple of `Param`s. From that one declaration:

- `parse` accepts exactly the declared names, refuses a missing required one, and checks and
  converts every value (type, length, bounds, enum, pattern) before the implementation runs;
- `object_schema` is the closed JSON Schema (draft 2020-12) the MCP server lists for the tool:
  the same names, required list, types, bounds and enums (V1-CONS-1: the listing comes from the
  stamp and each schema is derived from the implementation, never kept by hand);
- `key` says what the argument is to the key of a learned choice and to the human asked to
  confirm (runtime.operations, runtime.registry): where the operation acts (`Key.TARGET`) or what it
  does, by value (`Key.VALUE`, the default) or by its fingerprint (`Key.DIGEST`: sha256 and
  length, for bulk such as a file's content). There is no role outside the key: an argument
  nobody thought about is in it by value, and one too long to be shown whole is refused at
  import until it is declared `Key.DIGEST`.

A bound the schema states is one the parser enforces. What JSON Schema cannot say (a URL without
credentials, a real calendar date, the size of a JSON value in bytes) the parser checks and the
description says.

Nothing here imports the runtime, so the workspace, beneath the policy, declares its tools with
it too.
"""

import datetime
import hashlib
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import rfc8785

from virgo import outbound

TEXT_MAX = 64 * 1024
TITLE_MAX = 200
# The longest string a key holds as is. A confirmation card shows strings up to this length
# whole (channel.routing), so a human always sees every value the key covers.
SHOWN_WHOLE_MAX = 2000

# "Not blank" in JSON Schema terms: some character that is not white space.
_NOT_BLANK = r"\S"


class ArgumentError(ValueError):
    """A name or a value the declaration does not admit; the message names the argument."""


class Key(StrEnum):
    """What an argument is to the key of a learned choice: every argument is in it."""

    TARGET = "target"
    VALUE = "value"
    DIGEST = "digest"


def fingerprint(value: Any) -> dict[str, Any]:
    """How the key holds a DIGEST argument: the sha256 and length of its bytes.

    A string's bytes are its UTF-8 form (so a file's content matches the file's own sha256);
    anything else is hashed in canonical JSON (RFC 8785).
    """
    data = value.encode("utf-8") if isinstance(value, str) else rfc8785.dumps(value)
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


@dataclass(frozen=True)
class Param(ABC):
    """One argument: its name, what it means, whether it is required, its default, and what it
    is to the key of a learned choice."""

    name: str
    description: str
    _: KW_ONLY
    required: bool = False
    default: Any = None
    key: Key = Key.VALUE

    def schema(self) -> dict[str, Any]:
        schema = {**self.value_schema(), "description": self.description}
        if self.default not in (None, ""):
            schema["default"] = self.default
        return schema

    def absent(self) -> Any:
        """What the implementation sees when the caller leaves the argument out."""
        return self.default

    def longest_string(self) -> int | None:
        """The longest string a value can hold (None: no bound); 0 when it holds none."""
        return 0

    @abstractmethod
    def value_schema(self) -> dict[str, Any]:
        """The JSON Schema of a value, without the description."""

    @abstractmethod
    def parse(self, value: Any) -> Any:
        """The value checked and converted for the implementation; ArgumentError if wrong."""


@dataclass(frozen=True, kw_only=True)
class Text(Param):
    """A string of at most `max_length` characters.

    `pattern` must match the whole value; `blank` says whether an optional text may be empty or
    white space (a required one never may); `check` converts or refuses what a pattern cannot
    judge, raising ArgumentError.
    """

    default: str | None = ""
    max_length: int = TEXT_MAX
    blank: bool = True
    pattern: str | None = None
    format: str | None = None
    check: Callable[[str, str], str] | None = None

    @property
    def _not_blank(self) -> bool:
        return self.required or not self.blank

    def longest_string(self) -> int:
        return self.max_length

    def value_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string", "maxLength": self.max_length}
        if self._not_blank:
            schema["minLength"] = 1
        if self.pattern is not None:
            lookahead = rf"(?=[\s\S]*{_NOT_BLANK})" if self._not_blank else ""
            schema["pattern"] = f"^{lookahead}(?:{self.pattern})$"
        elif self._not_blank:
            schema["pattern"] = _NOT_BLANK
        if self.format is not None:
            schema["format"] = self.format
        return schema

    def parse(self, value: Any) -> str:
        if not isinstance(value, str):
            raise ArgumentError(f"{self.name} must be a string")
        if len(value) > self.max_length:
            raise ArgumentError(f"{self.name} is longer than {self.max_length} characters")
        if self._not_blank and not value.strip():
            raise ArgumentError(f"{self.name} must not be blank")
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            raise ArgumentError(f"{self.name} does not have the form {self.pattern}")
        return self.check(self.name, value) if self.check else value


@dataclass(frozen=True, kw_only=True)
class Choice(Param):
    """One of a fixed set of strings."""

    options: tuple[str, ...]

    def longest_string(self) -> int:
        return max(len(option) for option in self.options)

    def value_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.options)}

    def parse(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.options:
            raise ArgumentError(f"{self.name} must be one of {', '.join(self.options)}")
        return value


@dataclass(frozen=True, kw_only=True)
class Integer(Param):
    """A whole number from `minimum` up to `maximum` (None: no upper bound)."""

    minimum: int = 0
    maximum: int | None = None

    def value_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer", "minimum": self.minimum}
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema

    def parse(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArgumentError(f"{self.name} must be an integer")
        if value < self.minimum or (self.maximum is not None and value > self.maximum):
            upper = f" and at most {self.maximum}" if self.maximum is not None else ""
            raise ArgumentError(f"{self.name} must be at least {self.minimum}{upper}")
        return value


@dataclass(frozen=True, kw_only=True)
class Id(Param):
    """The id (a UUID) of a record; returned in its canonical lower-case form."""

    def value_schema(self) -> dict[str, Any]:
        return {"type": "string", "format": "uuid"}

    def parse(self, value: Any) -> str:
        if not is_uuid(value):
            raise ArgumentError(f"{self.name} must be an id (a UUID)")
        return str(uuid.UUID(value))


@dataclass(frozen=True, kw_only=True)
class Strings(Param):
    """A list of non-blank strings; `options` limits the items, `unique` forbids repeats."""

    max_items: int
    max_length: int = TITLE_MAX
    options: tuple[str, ...] = ()
    unique: bool = False

    def absent(self) -> list[str]:
        return []

    def longest_string(self) -> int:
        return max((len(option) for option in self.options), default=self.max_length)

    def value_schema(self) -> dict[str, Any]:
        items: dict[str, Any] = (
            {"type": "string", "enum": list(self.options)}
            if self.options
            else {"type": "string", "minLength": 1, "maxLength": self.max_length,
                  "pattern": _NOT_BLANK}
        )  # fmt: skip
        schema = {"type": "array", "items": items, "maxItems": self.max_items}
        if self.unique:
            schema["uniqueItems"] = True
        return schema

    def parse(self, value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ArgumentError(f"{self.name} must be a list of strings")
        if len(value) > self.max_items:
            raise ArgumentError(f"{self.name} takes at most {self.max_items} items")
        if self.options:
            if any(item not in self.options for item in value):
                raise ArgumentError(f"{self.name} must be among {', '.join(self.options)}")
        elif any(len(item) > self.max_length or not item.strip() for item in value):
            raise ArgumentError(f"each of {self.name} must be 1-{self.max_length} characters")
        if self.unique and len(set(value)) != len(value):
            raise ArgumentError(f"{self.name} must be distinct")
        return value


@dataclass(frozen=True, kw_only=True)
class Lines(Param):
    """Free text given either as one string or as a list of lines; the implementation sees one
    string (the lines joined by newlines)."""

    default: str = ""
    max_items: int
    max_length: int = TEXT_MAX

    def longest_string(self) -> int:
        return self.max_length

    def value_schema(self) -> dict[str, Any]:
        text, lines = self._forms()
        return {"anyOf": [text.value_schema(), lines.value_schema()]}

    def parse(self, value: Any) -> str:
        text, lines = self._forms()
        if isinstance(value, list):
            return "\n".join(lines.parse(value))
        return text.parse(value)

    def _forms(self) -> tuple[Text, Strings]:
        return (
            Text(self.name, self.description, max_length=self.max_length),
            Strings(
                self.name, self.description, max_items=self.max_items, max_length=self.max_length
            ),
        )


@dataclass(frozen=True, kw_only=True)
class Object(Param):
    """A JSON object of at most `max_bytes` in canonical form (RFC 8785)."""

    max_bytes: int = TEXT_MAX

    def absent(self) -> dict[str, Any]:
        return {}

    def longest_string(self) -> None:
        return None

    def value_schema(self) -> dict[str, Any]:
        return {"type": "object"}

    def schema(self) -> dict[str, Any]:
        schema = super().schema()
        schema["description"] += f" At most {self.max_bytes} bytes as canonical JSON."
        return schema

    def parse(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ArgumentError(f"{self.name} must be an object")
        try:
            size = len(rfc8785.dumps(value))
        except (TypeError, ValueError, rfc8785.CanonicalizationError):
            raise ArgumentError(f"{self.name} must be plain JSON") from None
        if size > self.max_bytes:
            raise ArgumentError(f"{self.name} is larger than {self.max_bytes} bytes")
        return value


@dataclass(frozen=True, kw_only=True)
class Records(Param):
    """A list of objects that each have exactly the `fields` given, every one required."""

    fields: tuple[Param, ...]
    max_items: int

    def __post_init__(self) -> None:
        optional = [f.name for f in self.fields if not f.required]
        if optional:
            raise ValueError(f"{self.name}: every field of a record is required: {optional}")

    def longest_string(self) -> int | None:
        lengths = [f.longest_string() for f in self.fields]
        return None if None in lengths else max(lengths, default=0)

    def value_schema(self) -> dict[str, Any]:
        return {
            "type": "array",
            "items": object_schema(self.fields),
            "maxItems": self.max_items,
        }

    def parse(self, value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, list) or len(value) > self.max_items:
            raise ArgumentError(f"{self.name} must be a list of at most {self.max_items} items")
        names = {f.name for f in self.fields}
        items = []
        for item in value:
            if not isinstance(item, dict) or set(item) != names:
                shape = ", ".join(f.name for f in self.fields)
                raise ArgumentError(f"each item of {self.name} is an object {{{shape}}}")
            try:
                items.append({f.name: f.parse(item[f.name]) for f in self.fields})
            except ArgumentError as exc:
                raise ArgumentError(f"{self.name}: {exc}") from None
        return items


# Formats JSON Schema names but does not check: the parser does. ---------------------------------


def is_uuid(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def http_url(name: str, value: str) -> str:
    """An http(s) URL with a host and no credentials in it ('' stays '': no URL given)."""
    if not value:
        return value
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        raise ArgumentError(f"{name} is not a URL") from None
    if parts.scheme not in ("https", "http") or not host:
        raise ArgumentError(f"{name} must be an http(s) URL")
    if parts.username or parts.password:
        raise ArgumentError(f"{name} must not carry credentials")
    return value


def outbound_url(name: str, value: str) -> str:
    """An http(s) URL that does not lead to a loopback, private, link-local or metadata address.

    A host name is resolved and every address checked (virgo.outbound); one that resolves to
    nothing now is let through, since whatever connects to it checks again when it dials.
    """
    value = http_url(name, value)
    if not value:
        return value
    try:
        outbound.destination(value, what=name)
    except outbound.Unresolvable:
        pass
    except outbound.DestinationRefused as exc:
        raise ArgumentError(str(exc)) from None
    return value


def calendar_date(name: str, value: str) -> str:
    try:
        return datetime.date.fromisoformat(value).isoformat()
    except ValueError:
        raise ArgumentError(f"{name} must be a date, YYYY-MM-DD") from None


def url(
    name: str,
    description: str,
    *,
    required: bool = False,
    max_length: int = 1024,
    outbound: bool = False,
) -> Text:
    """An http(s) URL without credentials; an optional one may be left empty.

    `outbound`: Virgo sends to it or records a publication there, so it must lead to a public
    address (`outbound_url`).
    """
    return Text(
        name,
        description,
        required=required,
        max_length=max_length,
        pattern="https?://.+" if required else "(?:https?://.+)?",
        format="uri",
        check=outbound_url if outbound else http_url,
    )


def date(name: str, description: str, *, required: bool = False) -> Text:
    return Text(
        name,
        description,
        required=required,
        blank=False,
        max_length=10,
        pattern="[0-9]{4}-[0-9]{2}-[0-9]{2}",
        format="date",
        check=calendar_date,
    )


# The declaration as a whole ---------------------------------------------------------------------


def check_declaration(params: Sequence[Param]) -> tuple[Param, ...]:
    """The declaration, refused at import if two arguments share a name, or if an argument the
    key holds as is could hold a string too long to be shown whole (declare it `Key.DIGEST`)."""
    names = [param.name for param in params]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"arguments declared twice: {', '.join(repeated)}")
    for param in params:
        longest = param.longest_string()
        if param.key is not Key.DIGEST and (longest is None or longest > SHOWN_WHOLE_MAX):
            bound = "unbounded strings" if longest is None else f"strings of {longest} characters"
            raise ValueError(
                f"argument {param.name}: its value may hold {bound}, more than a confirmation "
                f"shows whole ({SHOWN_WHOLE_MAX}); declare it key=Key.DIGEST"
            )
    return tuple(params)


def parse(params: Sequence[Param], values: Mapping[str, Any], *, tool: str) -> dict[str, Any]:
    """The arguments the caller gave, checked and converted; a null counts as not given.

    Raises ArgumentError naming every argument the tool does not take, or every required one
    that is missing, or the first value that is wrong.
    """
    declared = {param.name: param for param in params}
    unknown = sorted(set(values) - set(declared))
    if unknown:
        takes = ", ".join(declared) or "no arguments"
        raise ArgumentError(f"{tool} does not take {', '.join(unknown)} (it takes: {takes})")
    given = {name: value for name, value in values.items() if value is not None}
    missing = [param.name for param in params if param.required and param.name not in given]
    if missing:
        raise ArgumentError(f"{tool} needs {', '.join(missing)}")
    return {param.name: param.parse(given[param.name]) for param in params if param.name in given}


def object_schema(params: Sequence[Param]) -> dict[str, Any]:
    """The closed JSON Schema of an object with exactly these arguments."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {param.name: param.schema() for param in params},
        "additionalProperties": False,
    }
    required = [param.name for param in params if param.required]
    if required:
        schema["required"] = required
    return schema
