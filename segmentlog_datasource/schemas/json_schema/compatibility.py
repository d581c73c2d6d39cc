"""Compatibility of JSON schemas as Schema Registry checks a new version of a subject: its
JSON Schema diff of an original and an update lists differences (a type changed, a
property added to an open content model, enum values removed, ...), and the update is
compatible when every one is among the changes its STRICT policy (the default) allows.
BACKWARD diffs the latest version (original) against the new schema (update), FORWARD the
other way, FULL both; the *_TRANSITIVE levels every live version, newest first.

Each schema part is classified as the registry's schema loader classifies it: a `type`
list is an anyOf of one schema per type; several kinds of keyword in one object (a type
and an enum, a type and a oneOf) are an allOf of them; `$ref`s within the document are
followed. The diff covers objects (required, properties against the open, closed and
partially open content models, dependencies, additionalProperties, property counts),
arrays (items, tuples against their content models, additionalItems, counts,
uniqueItems, contains), strings (length, pattern; `format` is not compared, as the
registry does not compare it), numbers (bounds, multipleOf, integer/number widening),
enum and const, not, and oneOf/anyOf/allOf (the criterion, the count, and a maximum
matching of compatible alternatives). Not covered: remote `$ref`s, the LENIENT policy.
"""
import json
import re
from decimal import Decimal
from typing import Any, Dict, List, Optional, Tuple

from ..compatibility import Incomparable, level_problem
from . import canonical_text, enum_key, local_target, parse_schema_text, pointer_token

_OBJECT_KEYWORDS = ("properties", "additionalProperties", "required", "patternProperties",
                    "minProperties", "maxProperties", "dependencies", "propertyNames",
                    "unevaluatedProperties", "dependentRequired", "dependentSchemas")
_ARRAY_KEYWORDS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems",
                   "contains", "prefixItems", "minContains", "maxContains",
                   "unevaluatedItems")


# The differences the registry counts as compatible (its STRICT policy, the default).
COMPATIBLE_CHANGES = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED",
    "SCHEMA_REMOVED", "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED",
    "MIN_LENGTH_REMOVED", "PATTERN_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED",
    "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED",
    "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED",
    "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED",
    "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED",
    "MAX_CONTAINS_INCREASED", "MAX_CONTAINS_REMOVED", "MIN_CONTAINS_DECREASED",
    "MIN_CONTAINS_REMOVED",
    "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
    "UNEVALUATED_PROPERTIES_ADDED", "UNEVALUATED_PROPERTIES_EXTENDED",
    "UNEVALUATED_ITEMS_ADDED", "UNEVALUATED_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_EXTENDED",
    "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED",
    "NOT_TYPE_NARROWED",
})

_EXPLAINED = {
    "TYPE_CHANGED": "the type changed",
    "TYPE_NARROWED": "number narrowed to integer",
    "SCHEMA_ADDED": "a schema added where any value was allowed",
    "REQUIRED_ATTRIBUTE_ADDED": "the property became required, without a default",
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        "a required property without a default added",
    "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL":
        "a required property without a default added to an open content model",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL":
        "a property added to an open content model (the earlier schema allowed any "
        "additional property, so its data may hold this one with another type)",
    "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL":
        "a property added to an open content model (the earlier schema allowed any "
        "additional property, so its data may hold this one with another type)",
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL":
        "a property removed from a closed content model (additionalProperties false), "
        "so data that holds it no longer fits",
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL":
        "a property added that the earlier additionalProperties schema does not cover",
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL":
        "a property removed that the new additionalProperties schema does not cover",
    "ADDITIONAL_PROPERTIES_REMOVED": "additional properties no longer allowed",
    "ADDITIONAL_PROPERTIES_NARROWED": "additional properties narrowed to a schema",
    "ENUM_ARRAY_NARROWED": "enum values removed",
    "ENUM_ARRAY_CHANGED": "enum values changed",
    "SUM_TYPE_NARROWED": "alternatives removed from the union",
    "PRODUCT_TYPE_EXTENDED": "schemas added to allOf",
    "COMBINED_TYPE_CHANGED": "the kind of combination (oneOf/anyOf/allOf) changed",
    "COMBINED_TYPE_SUBSCHEMAS_CHANGED": "the union's alternatives changed incompatibly",
    "ADDITIONAL_ITEMS_REMOVED": "additional items no longer allowed",
    "ADDITIONAL_ITEMS_NARROWED": "additional items narrowed to a schema",
    "UNIQUE_ITEMS_ADDED": "uniqueItems added",
    "PATTERN_ADDED": "a pattern added", "PATTERN_CHANGED": "the pattern changed",
}

_ANNOTATIONS = ("title", "description", "default", "$id", "id", "$schema", "examples",
                "$comment", "definitions", "$defs", "readOnly", "writeOnly", "format",
                "contentEncoding", "contentMediaType")
_COMBINERS = ("allOf", "anyOf", "oneOf")
_KEYWORDS_OF = {
    "object": _OBJECT_KEYWORDS, "array": _ARRAY_KEYWORDS,
    "string": ("minLength", "maxLength", "pattern"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}


class _Document:
    """One side's schema document: resolves its local $refs and classifies its parts as
    the registry's schema loader does (which Schema class each would be)."""

    def __init__(self, root):
        self.root = root

    def resolve(self, schema):
        for _ in range(64):
            if not (isinstance(schema, dict) and "$ref" in schema):
                return schema
            target = local_target(self.root, schema["$ref"])
            if target is None:
                return {}  # an unresolvable $ref: the registry would refuse the schema
            schema = target
        return schema

    @staticmethod
    def parts(schema) -> List[Any]:
        """The loader's parts of a schema object; several make an allOf."""
        parts = []
        kind = schema.get("type")
        if isinstance(kind, list):
            parts.append({"anyOf": [{**_only(schema, kind_), "type": kind_}
                                    for kind_ in kind]})
        elif isinstance(kind, str):
            parts.append({**_only(schema, kind), "type": kind})
        else:
            for implied, keywords in _KEYWORDS_OF.items():
                if any(k in schema for k in keywords):
                    parts.append({**_only(schema, implied), "type": implied})
        for keyword in ("enum", "const", "not") + _COMBINERS:
            if keyword in schema:
                parts.append({keyword: schema[keyword]})
        return parts

    def kind(self, schema) -> Tuple[str, Any]:
        """(kind, the schema of that kind): empty, false, null, boolean, string, number,
        object, array, enum, const, not, combined."""
        schema = self.resolve(schema)
        if schema is True:
            return "empty", {}
        if schema is False:
            return "false", False
        if not isinstance(schema, dict):
            return "empty", {}
        parts = self.parts(schema)
        if not parts:
            return "empty", schema
        if len(parts) > 1:
            return "combined", {"allOf": parts, **{k: schema[k] for k in _ANNOTATIONS
                                                   if k in schema}}
        part = parts[0]
        if any(keyword in part for keyword in _COMBINERS):
            return "combined", {**{k: schema[k] for k in _ANNOTATIONS if k in schema}, **part}
        if "enum" in part:
            return "enum", schema
        if "const" in part:
            return "const", schema
        if "not" in part:
            return "not", schema
        kind = part["type"]
        if kind in ("integer", "number"):
            return "number", {**schema, **part}
        return kind, {**schema, **part}


def _only(schema: dict, kind: str) -> dict:
    """A schema's keywords that belong to one type (and its annotations)."""
    keep = _KEYWORDS_OF.get("number" if kind == "integer" else kind, ())
    return {k: v for k, v in schema.items()
            if k in keep or k in _ANNOTATIONS or k.startswith("connect.")}


def _criterion(schema: dict) -> str:
    return next(k for k in _COMBINERS if k in schema)


def _open(schema: dict) -> bool:
    """A fully open content model: any additional property, of any value."""
    additional = schema.get("additionalProperties", True)
    uneval = schema.get("unevaluatedProperties", True)
    return additional is True and not schema.get("patternProperties") and \
        (uneval is True or uneval == {})


def _partial(schema: dict, name: str):
    """The schema a partially open content model gives a property it does not name."""
    for pattern, part in (schema.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, name):
                return part
        except re.error:
            continue
    additional = schema.get("additionalProperties", True)
    if isinstance(additional, dict):
        return additional
    uneval = schema.get("unevaluatedProperties")
    if additional is True and isinstance(uneval, dict) and uneval:
        return uneval
    return None


def _field_path(pointer: str) -> str:
    """The dotted field path of a pointer into a schema (#/properties/a/items -> a[])."""
    parts = pointer.lstrip("#").split("/")[1:]
    out, index = "", 0
    while index < len(parts):
        part = parts[index]
        if part in ("properties", "required") and index + 1 < len(parts):
            name = parts[index + 1].replace("~1", "/").replace("~0", "~")
            out += f".{name}" if out else name
            index += 2
            continue
        if part == "items":
            out += "[]"
        elif part == "additionalProperties":
            out += "{}"
        index += 1
    return out


class _Diff:
    """Schema Registry's JSON Schema diff of an original and an update: the differences,
    each (rule, pointer)."""

    def __init__(self, original, update):
        self.old, self.new = _Document(original), _Document(update)
        self.active = set()

    def incompatible(self) -> Optional[Tuple[str, str, str]]:
        for rule, pointer, detail in self.compare(self.old.root, self.new.root, "#"):
            if rule not in COMPATIBLE_CHANGES:
                return rule, pointer, detail
        return None

    def compatible(self, old, new, pointer) -> Tuple[bool, list]:
        found = self.compare(old, new, pointer)
        return all(rule in COMPATIBLE_CHANGES for rule, _, _ in found), found

    def compare(self, old, new, pointer) -> List[Tuple[str, str, str]]:
        if old is None and new is None:
            return []
        if old is None:
            return [("SCHEMA_ADDED", pointer, "")]
        if new is None:
            return [("SCHEMA_REMOVED", pointer, "")]
        old, new = self.old.resolve(old), self.new.resolve(new)
        key = (id(old), id(new))
        if key in self.active:  # a recursive schema: taken as compatible where it recurs
            return []
        old_kind, old_schema = self.old.kind(old)
        new_kind, new_schema = self.new.kind(new)
        self.active.add(key)
        try:
            return self.compare_kinds(old_kind, old_schema, new_kind, new_schema, pointer)
        finally:
            self.active.discard(key)

    def compare_kinds(self, old_kind, old, new_kind, new, pointer):
        if old_kind != "combined" and new_kind == "combined":
            members = new[_criterion(new)]
            if len(members) == 1:
                ok, found = self.compatible(old, members[0], pointer)
                if ok:
                    return found
            elif _criterion(new) in ("anyOf", "oneOf"):
                for member in members:
                    ok, found = self.compatible(old, member, pointer)
                    if ok:
                        return found + [("SUM_TYPE_EXTENDED", pointer, "")]
        elif old_kind == "combined" and new_kind != "combined":
            members = old[_criterion(old)]
            if len(members) == 1:
                ok, found = self.compatible(members[0], new, pointer)
                if ok:
                    return found
            elif _criterion(old) == "allOf":
                for member in members:
                    ok, found = self.compatible(member, new, pointer)
                    if ok:
                        return found + [("PRODUCT_TYPE_NARROWED", pointer, "")]
        if old_kind != new_kind:
            if old_kind == "false" or new_kind == "empty":
                return []
            if isinstance(old, dict) and isinstance(new, dict) and \
                    old.get("connect.type") == "bytes" == new.get("connect.type"):
                return []
            return [("TYPE_CHANGED", pointer, f"from {_kind_name(old_kind, old)} to "
                                              f"{_kind_name(new_kind, new)}")]
        found = []
        for keyword, rule in (("$id", "ID_CHANGED"), ("title", "TITLE_CHANGED"),
                              ("description", "DESCRIPTION_CHANGED"),
                              ("default", "DEFAULT_CHANGED")):
            if isinstance(old, dict) and isinstance(new, dict) and \
                    old.get(keyword) != new.get(keyword):
                found.append((rule, pointer, ""))
        compare = getattr(self, f"compare_{old_kind}", None)
        if compare is not None:
            found += compare(old, new, pointer)
        return found

    @staticmethod
    def bound(found, pointer, keyword, old, new, larger_rule, smaller_rule):
        """maxLength, minimum, ...: <KEYWORD>_ADDED / _REMOVED / larger / smaller."""
        a, b = old.get(keyword), new.get(keyword)
        if a == b:
            return
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", keyword).upper()
        if a is None:
            found.append((f"{name}_ADDED", f"{pointer}/{keyword}", ""))
        elif b is None:
            found.append((f"{name}_REMOVED", f"{pointer}/{keyword}", ""))
        elif isinstance(a, (int, float, Decimal)) and isinstance(b, (int, float, Decimal)):
            found.append((f"{name}_{larger_rule if a < b else smaller_rule}",
                          f"{pointer}/{keyword}", f"{a} to {b}"))

    def compare_string(self, old, new, pointer):
        found = []
        self.bound(found, pointer, "maxLength", old, new, "INCREASED", "DECREASED")
        self.bound(found, pointer, "minLength", old, new, "INCREASED", "DECREASED")
        a, b = old.get("pattern"), new.get("pattern")
        if a is None and b is not None:
            found.append(("PATTERN_ADDED", f"{pointer}/pattern", ""))
        elif a is not None and b is None:
            found.append(("PATTERN_REMOVED", f"{pointer}/pattern", ""))
        elif a != b:
            found.append(("PATTERN_CHANGED", f"{pointer}/pattern", ""))
        return found

    def compare_number(self, old, new, pointer):
        found = []
        for keyword in ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum"):
            self.bound(found, pointer, keyword, old, new, "INCREASED", "DECREASED")
        a, b = old.get("multipleOf"), new.get("multipleOf")
        if a is not None or b is not None:
            a = None if a is None else Decimal(str(a))
            b = None if b is None else Decimal(str(b))
            if a is None:
                found.append(("MULTIPLE_OF_ADDED", f"{pointer}/multipleOf", ""))
            elif b is None:
                found.append(("MULTIPLE_OF_REMOVED", f"{pointer}/multipleOf", ""))
            elif a != b:
                rule = "MULTIPLE_OF_EXPANDED" if a and b % a == 0 else \
                    "MULTIPLE_OF_REDUCED" if b and a % b == 0 else "MULTIPLE_OF_CHANGED"
                found.append((rule, f"{pointer}/multipleOf", f"{a} to {b}"))
        old_integer, new_integer = old.get("type") == "integer", new.get("type") == "integer"
        if old_integer and not new_integer:
            found.append(("TYPE_EXTENDED", pointer, "integer to number"))
        elif new_integer and not old_integer:
            found.append(("TYPE_NARROWED", pointer, "number to integer"))
        return found

    def compare_enum(self, old, new, pointer):
        a = {enum_key(v) for v in old["enum"]} if isinstance(old["enum"], list) else set()
        b = {enum_key(v) for v in new["enum"]} if isinstance(new["enum"], list) else set()
        if a == b:
            return []
        rule = "ENUM_ARRAY_EXTENDED" if b >= a else "ENUM_ARRAY_NARROWED" if a >= b \
            else "ENUM_ARRAY_CHANGED"
        lost = [v for v in old["enum"] if enum_key(v) not in b]
        return [(rule, f"{pointer}/enum", f"values {json.dumps(lost, default=str)} no longer "
                                          f"allowed" if lost else "")]

    def compare_const(self, old, new, pointer):
        if enum_key(old["const"]) != enum_key(new["const"]):
            return [("ENUM_ARRAY_CHANGED", f"{pointer}/const", "")]
        return []

    def compare_not(self, old, new, pointer):
        # the negated schemas compared the other way round
        ok, _ = self.compatible(new["not"], old["not"], f"{pointer}/not")
        if ok:
            return [("NOT_TYPE_NARROWED", f"{pointer}/not", "")]
        ok, _ = self.compatible(old["not"], new["not"], f"{pointer}/not")
        return [("NOT_TYPE_EXTENDED", f"{pointer}/not", "")] if ok else \
            [("TYPE_CHANGED", f"{pointer}/not", "the negated schema changed")]

    def compare_combined(self, old, new, pointer):
        found = []
        a_criterion, b_criterion = _criterion(old), _criterion(new)
        a = _unique(old[a_criterion])
        b = _unique(new[b_criterion])
        if a_criterion != b_criterion:
            if b_criterion == "anyOf" or (len(a) == 1 and len(b) == 1) or \
                    (len(a) == 1 and b_criterion == "oneOf") or \
                    (len(b) == 1 and a_criterion == "allOf"):
                found.append(("COMBINED_TYPE_EXTENDED", pointer, ""))
            else:
                return [("COMBINED_TYPE_CHANGED", pointer, f"{a_criterion} to {b_criterion}")]
        if len(a) < len(b):
            found.append(("PRODUCT_TYPE_EXTENDED" if b_criterion == "allOf"
                          else "SUM_TYPE_EXTENDED", pointer, ""))
        elif len(a) > len(b):
            found.append(("SUM_TYPE_NARROWED" if a_criterion in ("anyOf", "oneOf")
                          else "PRODUCT_TYPE_NARROWED", pointer, ""))
        edges: Dict[int, Dict[int, list]] = {}
        problems: Dict[Tuple[int, int], tuple] = {}
        for i, member in enumerate(a):
            where = f"{pointer}/{a_criterion}/{i}"
            for j, other in enumerate(b):
                ok, differences = self.compatible(member, other, where)
                if ok:
                    edges.setdefault(i, {})[j] = differences
                else:
                    problems[i, j] = next(d for d in differences
                                          if d[0] not in COMPATIBLE_CHANGES)
        matched = _maximum_matching(edges, len(a))
        for i, j in matched.items():
            found += edges[i][j]
        if len(matched) < min(len(a), len(b)):
            unmatched = [i for i in range(len(a)) if i not in matched]
            # the nearest failure: an unmatched original against the new alternative of
            # its own kind, for the reason's sake
            detail = ""
            free = [j for j in range(len(b)) if j not in matched.values()]
            for i in unmatched:
                same = [j for j in free if (i, j) in problems and
                        self.old.kind(a[i])[0] == self.new.kind(b[j])[0]]
                candidates = same or [j for j in free if (i, j) in problems]
                if candidates:
                    rule, where, more = problems[i, candidates[0]]
                    detail = f"{where}: {rule}" + (f" ({more})" if more else "")
                    break
            found.append(("COMBINED_TYPE_SUBSCHEMAS_CHANGED", pointer, detail))
        return found

    def compare_object(self, old, new, pointer):
        found = []
        old_properties = old.get("properties") or {}
        new_properties = new.get("properties") or {}
        old_required = set(old.get("required") or ())
        new_required = set(new.get("required") or ())
        for name in old_properties:
            if name in new_properties:
                where = f"{pointer}/required/{pointer_token(name)}"
                if name in old_required and name not in new_required:
                    found.append(("REQUIRED_ATTRIBUTE_REMOVED", where, ""))
                elif name not in old_required and name in new_required:
                    found.append(("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                                  if _has_default(self.new.resolve(new_properties[name]))
                                  else "REQUIRED_ATTRIBUTE_ADDED", where, ""))
        names = list(old_properties) + [n for n in new_properties if n not in old_properties]
        for name in names:
            where = f"{pointer}/properties/{pointer_token(name)}"
            before, after = old_properties.get(name), new_properties.get(name)
            if after is None:
                found += self.property_removed(before, new, name, where)
            elif before is None:
                found += self.property_added(after, old, new, name, new_required, where)
            else:
                found += self.compare(before, after, where)
        found += self.compare_dependencies(old, new, pointer)
        found += self.compare_additional(old, new, pointer)
        for keyword in ("maxProperties", "minProperties"):
            self.bound(found, pointer, keyword, old, new, "INCREASED", "DECREASED")
        return found

    def property_removed(self, before, new, name, where):
        if _open(new):
            return [("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", where, "")]
        covering = _partial(new, name)
        if covering is not None:
            ok, found = self.compatible(before, covering, where)
            return found + [("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                             if ok else
                             "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                             where, "")]
        if self.old.resolve(before) is False:
            return [("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where, "")]
        return [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where, "")]

    def property_added(self, after, old, new, name, new_required, where):
        resolved = self.new.resolve(after)
        if _open(old):
            if resolved is True or resolved == {}:
                return [("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where, "")]
            if name in new_required:
                return [("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                         if _has_default(resolved) else
                         "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where, "")]
            return [("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where, "")]
        found = []
        covering = _partial(old, name)
        if covering is not None:
            ok, differences = self.compatible(covering, after, where)
            found += differences + [
                ("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if ok else
                 "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where, "")]
        if name in new_required:
            found.append(("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                          if _has_default(resolved) else
                          "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where, ""))
        else:
            found.append(("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where, ""))
        return found

    def compare_additional(self, old, new, pointer):
        where = f"{pointer}/additionalProperties"
        a, b = old.get("additionalProperties", True), new.get("additionalProperties", True)
        a_permits, b_permits = a is not False, b is not False
        a_schema = a if isinstance(a, dict) else None
        b_schema = b if isinstance(b, dict) else None
        if a_permits != b_permits:
            return [("ADDITIONAL_PROPERTIES_ADDED" if b_permits
                     else "ADDITIONAL_PROPERTIES_REMOVED", where, "")]
        if a_schema is None and b_schema is not None:
            return [("ADDITIONAL_PROPERTIES_NARROWED", where, "")]
        if b_schema is None and a_schema is not None:
            return [("ADDITIONAL_PROPERTIES_EXTENDED", where, "")]
        return self.compare(a_schema, b_schema, where)

    def compare_array(self, old, new, pointer):
        found = []
        old_tuple, old_all, old_more = _array_parts(old)
        new_tuple, new_all, new_more = _array_parts(new)
        found += self.compare(old_all, new_all, f"{pointer}/items")
        found += self.compare_tuples(old_tuple, old_more, new_tuple, new_more, old, new,
                                     pointer)
        where = f"{pointer}/additionalItems"
        if (old_more is not False) != (new_more is not False):
            found.append(("ADDITIONAL_ITEMS_ADDED" if new_more is not False
                          else "ADDITIONAL_ITEMS_REMOVED", where, ""))
        elif not isinstance(old_more, dict) and isinstance(new_more, dict):
            found.append(("ADDITIONAL_ITEMS_NARROWED", where, ""))
        elif isinstance(old_more, dict) and not isinstance(new_more, dict):
            found.append(("ADDITIONAL_ITEMS_EXTENDED", where, ""))
        elif isinstance(old_more, dict):
            found += self.compare(old_more, new_more, where)
        for keyword in ("maxItems", "minItems"):
            self.bound(found, pointer, keyword, old, new, "INCREASED", "DECREASED")
        if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
            found.append(("UNIQUE_ITEMS_REMOVED" if old.get("uniqueItems")
                          else "UNIQUE_ITEMS_ADDED", f"{pointer}/uniqueItems", ""))
        for keyword in ("maxContains", "minContains"):
            self.bound(found, pointer, keyword, old, new, "INCREASED", "DECREASED")
        return found

    def compare_tuples(self, old_tuple, old_more, new_tuple, new_more, old, new, pointer):
        """Tuple items position by position; the extra positions of either side against
        the other side's content model (as properties are against an object's)."""
        found = []
        for index in range(max(len(old_tuple), len(new_tuple))):
            where = f"{pointer}/items/{index}"
            if index < len(old_tuple) and index < len(new_tuple):
                found += self.compare(old_tuple[index], new_tuple[index], where)
            elif index < len(old_tuple):  # an item removed
                before = old_tuple[index]
                covering = _partial_items(new, new_more)
                if _open_items(new, new_more):
                    found.append(("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", where, ""))
                elif covering is not None:
                    ok, differences = self.compatible(before, covering, where)
                    found += differences + [(
                        "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if ok else
                        "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where, "")]
                elif self.old.resolve(before) is False:
                    found.append(("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                                  ""))
                else:
                    found.append(("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", where, ""))
            else:  # an item added
                after = new_tuple[index]
                covering = _partial_items(old, old_more)
                if _open_items(old, old_more):
                    resolved = self.new.resolve(after)
                    found.append(("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                                  if resolved is True or resolved == {} else
                                  "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", where, ""))
                elif covering is not None:
                    ok, differences = self.compatible(covering, after, where)
                    found += differences + [(
                        "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if ok else
                        "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where, "")]
                else:
                    found.append(("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", where, ""))
        return found

    def compare_dependencies(self, old, new, pointer):
        found = []
        a, b = _dependencies(old), _dependencies(new)
        for name in list(a) + [n for n in b if n not in a]:
            where = f"{pointer}/dependencies/{pointer_token(name)}"
            before, after = a.get(name), b.get(name)
            if isinstance(before, list) or isinstance(after, list):  # property dependencies
                if not isinstance(after, list):
                    found.append(("DEPENDENCY_ARRAY_REMOVED", where, ""))
                elif not isinstance(before, list):
                    found.append(("DEPENDENCY_ARRAY_ADDED", where, ""))
                elif set(before) != set(after):
                    found.append(("DEPENDENCY_ARRAY_EXTENDED" if set(after) >= set(before)
                                  else "DEPENDENCY_ARRAY_NARROWED"
                                  if set(before) >= set(after)
                                  else "DEPENDENCY_ARRAY_CHANGED", where, ""))
            elif after is None:
                found.append(("DEPENDENCY_SCHEMA_REMOVED", where, ""))
            elif before is None:
                found.append(("DEPENDENCY_SCHEMA_ADDED", where, ""))
            else:
                found += self.compare(before, after, where)
        return found


def _dependencies(schema: dict) -> dict:
    """Property and schema dependencies, in draft 7's and 2019-09's spellings."""
    found = {}
    for keyword in ("dependencies", "dependentRequired", "dependentSchemas"):
        if isinstance(schema.get(keyword), dict):
            found.update(schema[keyword])
    return found


def _array_parts(schema: dict):
    """(tuple item schemas, the schema of every item or None, the schema or boolean of
    items past the tuple) of an array schema, in draft 7's and 2020-12's spellings."""
    if "prefixItems" in schema:
        items = schema.get("items", True)
        return list(schema["prefixItems"] or []), None, items
    items = schema.get("items")
    if isinstance(items, list):
        return items, None, schema.get("additionalItems", True)
    return [], None if items is None or items is True else items, \
        schema.get("additionalItems", True)


def _open_items(schema: dict, more) -> bool:
    uneval = schema.get("unevaluatedItems", True)
    return more is True and (uneval is True or uneval == {})


def _partial_items(schema: dict, more):
    if isinstance(more, dict):
        return more
    uneval = schema.get("unevaluatedItems")
    if more is True and isinstance(uneval, dict) and uneval:
        return uneval
    return None


def _has_default(schema) -> bool:
    return isinstance(schema, dict) and "default" in schema


def _unique(members) -> list:
    """A combination's members, duplicates (the same canonical text) once."""
    seen, out = set(), []
    for member in members if isinstance(members, list) else []:
        text = canonical_text(member)
        if text not in seen:
            seen.add(text)
            out.append(member)
    return out


def _maximum_matching(edges: Dict[int, Dict[int, list]], count: int) -> Dict[int, int]:
    """A maximum matching of a bipartite graph (augmenting paths): original -> update."""
    owner: Dict[int, int] = {}

    def augment(i, seen):
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(count):
        augment(i, set())
    return {i: j for j, i in owner.items()}


def _kind_name(kind: str, schema) -> str:
    if kind == "number" and isinstance(schema, dict):
        return schema.get("type", "number")
    if kind == "combined" and isinstance(schema, dict):
        return _criterion(schema)
    return {"empty": "any value", "false": "no value"}.get(kind, kind)


def first_incompatibility(original_text: str, update_text: str) -> Optional[str]:
    """Where and why the update is not compatible with the original by the registry's
    JSON Schema diff (the first incompatible difference found), or None."""
    found = _Diff(parse_schema_text(original_text),
                  parse_schema_text(update_text)).incompatible()
    if found is None:
        return None
    rule, pointer, detail = found
    explained = _EXPLAINED.get(rule, rule.lower().replace("_", " "))
    if detail:
        explained += f": {detail}"
    # a rule about the keyword itself is the object's (the pointer ends in the keyword)
    keyword_rule = rule.startswith(("ADDITIONAL_PROPERTIES_", "ADDITIONAL_ITEMS_"))
    field = _field_path(pointer.rpartition("/")[0] if keyword_rule else pointer)
    where = f"field {field} ({pointer})" if field else pointer
    return f"{where}: {rule}, {explained}"


def compatibility_problem(level: str, new_text: str, previous: List[Tuple[int, str]]
                          ) -> Optional[Tuple[int, str]]:
    """(version, reason) of the first earlier version `new_text` is incompatible with at
    `level` by the registry's JSON Schema diff (schema_format.level_problem); None when
    compatible."""
    return level_problem(level, new_text, previous, _unreadable)


def _unreadable(writer: str, writer_name: str, reader: str, reader_name: str
                ) -> Optional[str]:
    """Why data written with `writer` does not fit `reader` (the diff from the original,
    the writer, to the update, the reader)."""
    for text in (writer, reader):
        try:
            parse_schema_text(text)
        except ValueError as exc:
            raise Incomparable(f"its schema is not JSON ({exc}), so nothing can be checked "
                               f"against it") from None
    return first_incompatibility(writer, reader)
