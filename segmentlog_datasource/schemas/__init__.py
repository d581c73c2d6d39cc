"""Schema languages' cores shared by decoding (segmentlog_datasource.decode) and writing
(segmentlog_datasource.writer), one home per language for its facts (its text parsed and
printed as Schema Registry stores it, its types as Spark's both ways, resolution, the
registry's compatibility): avro.py, json_schema.py (with json_schema_compatibility.py),
protobuf/ (a folder: text.py, descriptors.py, mapping.py, resolution.py,
compatibility.py); compatibility.py, the registry's levels for every language;
registry.py and registry_records.py, Schema Registry's `_schemas` records and their
replay. They import only errors.py and each other.
"""
