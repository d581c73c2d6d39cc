"""Schema Registry's compatibility levels, the same for every schema language: which
earlier versions a new schema is checked against, and in which direction. Each language
says why data written with one schema does not read with another (avro.py,
json_schema.py, protobuf/compatibility.py)."""
from typing import Callable, List, Optional, Tuple

from ..errors import InvalidOptionError

COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD",
                        "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


class Incomparable(Exception):
    """A version's schema nothing can be checked against (it does not parse); the message
    is the whole reason."""


def level_problem(level: str, new_text: str, previous: List[Tuple[int, str]],
                  unreadable: Callable[[str, str, str, str], Optional[str]]
                  ) -> Optional[Tuple[int, str]]:
    """(version, reason) of the first earlier version `new_text` is incompatible with at
    `level`, as Schema Registry applies its levels whatever the language (BACKWARD: the
    new schema reads data of the latest version; FORWARD: the latest reads data of the
    new one; FULL: both; _TRANSITIVE: against every version, newest first); None when
    compatible. `previous`: (version, text) of the subject's live versions, oldest
    first. `unreadable(writer text, its name, reader text, its name)`: the language's
    reason why data written with one schema does not read with the other, or None; it
    raises Incomparable for a text it cannot check."""
    level = level.upper()
    if level not in COMPATIBILITY_LEVELS:
        raise InvalidOptionError(f"compatibility level {level!r} is not one Schema Registry "
                                 f"has ({', '.join(COMPATIBILITY_LEVELS)})")
    if level == "NONE" or not previous:
        return None
    against = list(reversed(previous)) if level.endswith("_TRANSITIVE") else [previous[-1]]
    new_name = "the new schema"
    for version, text in against:
        old_name = f"version {version}"
        try:
            if level.startswith(("BACKWARD", "FULL")):
                problem = unreadable(text, old_name, new_text, new_name)
                if problem is not None:
                    return version, f"the new schema cannot read data written with it: " \
                                    f"{problem}"
            if level.startswith(("FORWARD", "FULL")):
                problem = unreadable(new_text, new_name, text, old_name)
                if problem is not None:
                    return version, f"it cannot read data written with the new schema: " \
                                    f"{problem}"
        except Incomparable as reason:
            return version, str(reason)
    return None
