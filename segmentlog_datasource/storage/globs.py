"""Globs of directories, as Spark's file sources take them (Hadoop's glob syntax).

`/backup/broker-*`, `s3://bucket/backup/broker-[0-2]`, `/data/{east,west}/kafka-logs`:

* `*` any run of characters and `?` any one character, within one path component;
* `[abc]`, `[a-z]`, `[^a-z]` (or `[!a-z]`) one character of (not of) a class;
* `{a,b}` one of the alternatives (they may nest, and may hold `/`);
* `\\` takes the character after it literally.

A glob is matched against directories only, component by component: every component
before the first one with a glob character is taken as it is, and each later one is
matched against the directories listed under the matches so far (locally a directory
listing, in a store one delimited listing per directory matched: never the tree below).
A name starting with `.` is matched only by a component that starts with `.`, as a shell
does: dot-prefixed directories are never data here (staging areas, a trash folder).

The matches are sorted and without duplicates. When a glob matches nothing but names an
existing directory literally (`/backups/kafka[prod]`), that directory is the match: a
path that was read before globs existed reads the same. A path without an unescaped
`*`, `?`, `[` or `{` is no glob and is never listed here.
"""
import os
import re
import urllib.parse
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import InvalidOptionError, StoreError
from .base import Store
from .config import StoreConfig
from .resolve import _SCHEME, resolve

GLOB_CHARS = "*?[{"
GLOB_SYNTAX = "*, ?, [...] and {a,b}"


def is_glob(path) -> bool:
    """Whether `path` holds an unescaped `*`, `?`, `[` or `{`."""
    text = str(path)
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in GLOB_CHARS:
            return True
    return False


def _where(option: Optional[str]) -> str:
    return f"option {option!r}: " if option else ""


def _bad(pattern: str, option: Optional[str], reason: str) -> InvalidOptionError:
    return InvalidOptionError(
        f"{_where(option)}the glob {pattern!r} {reason} (a glob takes {GLOB_SYNTAX}, "
        f"and \\ makes the character after it literal)", option)


# --------------------------------------------------------------------- the pattern
def _past_escape_or_class(text: str, i: int, pattern: str, option: Optional[str]
                          ) -> Optional[int]:
    """Where scanning goes on after the escape (`\\x`) or the character class (`[...]`)
    that starts at `i`; None when neither does."""
    if text[i] == "\\":
        return i + 2
    if text[i] == "[":
        return _class_end(text, i, pattern, option) + 1
    return None


def _group_end(text: str, start: int, pattern: str, option: Optional[str]) -> int:
    """The index of the `}` that closes the `{` at `start`."""
    depth, i = 0, start
    while i < len(text):
        past = _past_escape_or_class(text, i, pattern, option)
        if past is not None:
            i = past
            continue
        char = text[i]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise _bad(pattern, option, "has a '{' without its '}'")


def _class_end(text: str, start: int, pattern: str, option: Optional[str]) -> int:
    """The index of the `]` that closes the `[` at `start` (a `]` first in the class,
    after any `^` or `!`, is one of its characters)."""
    i = start + 1
    if i < len(text) and text[i] in "^!":
        i += 1
    if i < len(text) and text[i] == "]":
        i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "]":
            return i
        if text[i] == "/":
            break
        i += 1
    raise _bad(pattern, option, "has a '[' without its ']'")


def _alternatives(body: str) -> List[str]:
    """The alternatives of a `{...}` group's body: split at its top-level commas."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            close = body.find("]", i + 2)
            i = close + 1 if close > 0 else i + 1
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return parts


def _expand_slash_groups(text: str, pattern: str, option: Optional[str]) -> List[str]:
    """`text` with every `{...}` group that holds a `/` written out, one text per
    alternative (as Hadoop's GlobExpander does); groups within one component stay."""
    i = 0
    while i < len(text):
        past = _past_escape_or_class(text, i, pattern, option)
        if past is not None:
            i = past
            continue
        char = text[i]
        if char == "{":
            end = _group_end(text, i, pattern, option)
            body = text[i + 1 : end]
            if "/" in body:
                expanded = []
                for alternative in _alternatives(body):
                    expanded.extend(_expand_slash_groups(
                        text[:i] + alternative + text[end + 1 :], pattern, option))
                return expanded
            i = end + 1
            continue
        if char == "}":
            raise _bad(pattern, option, "has a '}' without its '{'")
        i += 1
    return [text]


class _Component:
    """One path component of a glob: a literal name, or a regular expression."""

    def __init__(self, text: str, pattern: str, option: Optional[str]):
        self.text = text
        regex, literal, globbed = [], [], False
        depth, i = 0, 0
        while i < len(text):
            char = text[i]
            if char == "\\" and i + 1 < len(text):
                regex.append(re.escape(text[i + 1]))
                literal.append(text[i + 1])
                i += 2
                continue
            if char == "*":
                regex.append(".*")
                globbed = True
            elif char == "?":
                regex.append(".")
                globbed = True
            elif char == "[":
                end = _class_end(text, i, pattern, option)
                regex.append(self._char_class(text[i + 1 : end]))
                globbed = True
                i = end
            elif char == "{":
                regex.append("(?:")
                depth += 1
                globbed = True
            elif char == "," and depth:
                regex.append("|")
            elif char == "}" and depth:
                regex.append(")")
                depth -= 1
            else:
                regex.append(re.escape(char))
                literal.append(char)
            i += 1
        if depth:
            raise _bad(pattern, option, "has a '{' without its '}'")
        self.literal: Optional[str] = None if globbed else "".join(literal)
        self.regex = re.compile("".join(regex), re.DOTALL) if globbed else None
        # A dot-prefixed name only for a component that starts with a literal '.'.
        self.dot_names = text.startswith(".") or text.startswith("\\.")

    @staticmethod
    def _char_class(body: str) -> str:
        negate = body[:1] in ("^", "!")
        if negate:
            body = body[1:]
        out, i = [], 0
        while i < len(body):
            char = body[i]
            if char == "\\" and i + 1 < len(body):
                out.append("\\" + body[i + 1] if not body[i + 1].isalnum() else body[i + 1])
                i += 2
                continue
            out.append("\\" + char if char in "\\[]^&~|" else char)
            i += 1
        return "[" + ("^" if negate else "") + "".join(out) + "]"

    def matches(self, name: str) -> bool:
        if name.startswith(".") and not self.dot_names:
            return False
        return self.regex.fullmatch(name) is not None


# ---------------------------------------------------------------------- matching
_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?://(?P<netloc>[^/]*))?(?P<path>.*)$",
                  re.DOTALL)


def _split(text: str, pattern: str, option: Optional[str]) -> Tuple[str, List[str]]:
    """(root, components): the fixed start of a glob (`/`, or `s3://bucket`) and the
    components after it, as given (escapes kept)."""
    match = _SCHEME.match(text)
    if match is None or len(match.group("scheme")) == 1:
        return "/", [part for part in os.path.abspath(text).split("/") if part]
    parts = _URI.match(text)
    scheme = parts.group("scheme").lower()
    netloc, rest = parts.group("netloc"), parts.group("path")
    if scheme == "file":
        if netloc not in (None, "", "localhost"):
            raise InvalidOptionError(
                f"{_where(option)}{text!r}: a file: URI must name a path on this machine "
                f"(file:/dir or file:///dir), not on host {netloc!r}", option)
        return _split(urllib.parse.unquote(rest) or "/", pattern, option)
    if netloc is None or is_glob(netloc) or not (netloc or scheme in ("hdfs", "viewfs")):
        raise _bad(pattern, option, f"must name its {scheme}:// bucket, container or host "
                                    f"without glob characters ({scheme}://<bucket>/<glob>)")
    return f"{scheme}://{netloc}", [part for part in rest.split("/") if part]


class _Lister:
    """Directory names under directories of one store, each listed at most once."""

    def __init__(self, store: Store, pattern: str, option: Optional[str]):
        self.store, self.pattern, self.option = store, pattern, option
        self._dirs: Dict[str, List[str]] = {}

    def child_dirs(self, directory: str) -> List[str]:
        names = self._dirs.get(directory)
        if names is None:
            try:
                names = self._dirs[directory] = self.store.child_dirs(directory)
            except StoreError:
                raise
            except OSError as exc:
                raise StoreError(
                    f"{directory}: cannot list it to match the glob {self.pattern!r}"
                    f"{' of option ' + repr(self.option) if self.option else ''}: "
                    f"{exc.strerror or exc}") from None
        return names

    def has_dir(self, directory: str, name: str) -> bool:
        if not self.store.remote:
            return os.path.isdir(self.store.join(directory, name))
        return name in self.child_dirs(directory)


def _matches(text: str, pattern: str, config: Optional[StoreConfig], option: Optional[str]
             ) -> List[str]:
    root, parts = _split(text, pattern, option)
    components = [_Component(part, pattern, option) for part in parts]
    fixed = 0
    while fixed < len(components) and components[fixed].literal is not None:
        fixed += 1
    fixed = min(fixed, len(components) - 1)  # the last component is always looked for
    if fixed < 0:
        return []  # the root itself
    base_parts = [components[i].literal for i in range(fixed)]
    if root == "/":
        base = "/" + "/".join(base_parts)
    else:
        base = root + "/" + "/".join(base_parts) if base_parts else root
    store, base = resolve(base, config, option or "path")
    lister = _Lister(store, pattern, option)
    current = [base]
    for component in components[fixed:]:
        found = []
        for directory in current:
            if component.literal is not None:
                if lister.has_dir(directory, component.literal):
                    found.append(store.join(directory, component.literal))
            else:
                found.extend(store.join(directory, name)
                             for name in lister.child_dirs(directory)
                             if component.matches(name))
        current = found
        if not current:
            break
    return current


def _literal_directory(text: str, config: Optional[StoreConfig], option: Optional[str]
                       ) -> Optional[str]:
    """`text` resolved, when it names an existing directory as it stands."""
    try:
        store, path = resolve(text, config, option or "path")
    except InvalidOptionError:
        return None
    if not store.remote:
        return path if os.path.isdir(path) else None
    parent, name = store.dirname(path), store.basename(path)
    if not name or "://" not in parent:
        return None  # a bucket itself
    return path if name in store.child_dirs(parent) else None


def expand_glob(pattern, config: Optional[StoreConfig] = None,
                option: Optional[str] = "path") -> List[str]:
    """The directories `pattern` matches, sorted, each once, in the form `resolve` gives
    (local paths absolute, store URIs without a trailing '/'). A glob that matches
    nothing is an InvalidOptionError naming it and `option` (None: no option, as on the
    command line); a malformed one (an unclosed '[' or '{') too."""
    text = str(pattern)
    if "=" in urllib.parse.urlparse(text).query and "://" in text:
        # `?` after a store URI's path and before `key=value`: a query, which resolve
        # refuses naming the option, not a wildcard
        resolve(text, config, option or "path")
    found = set()
    for alternative in _expand_slash_groups(text, text, option):
        found.update(_matches(alternative, text, config, option))
    if not found:
        literal = _literal_directory(text, config, option)
        if literal is not None:
            return [literal]
        raise InvalidOptionError(
            f"{_where(option)}the glob {text!r} matches no directory (a glob is matched "
            f"against directories only, and a name starting with '.' only by a pattern "
            f"starting with '.')", option)
    return sorted(found)


def expand_paths(paths: Sequence, config: Optional[StoreConfig] = None,
                 option: Optional[str] = None) -> List[str]:
    """`paths` with each glob among them replaced by the directories it matches
    (expand_glob), in order, each path once (the first time). Paths that are no globs
    are kept as given; the command line passes its PATH arguments through here."""
    expanded: List[str] = []
    for path in paths:
        expanded.extend(expand_glob(path, config, option) if is_glob(path) else [str(path)])
    return list(dict.fromkeys(expanded))


def refuse_glob(path, option: str = "path", what: str = "a write") -> None:
    """An InvalidOptionError when `path` is a glob: `what` goes to one directory."""
    if is_glob(path):
        raise InvalidOptionError(
            f"option {option!r} is {str(path)!r}: {what} goes to one log dir, and a glob "
            f"({GLOB_SYNTAX}) may name several, or none; give the directory itself "
            f"(globs are for reads)", option)
