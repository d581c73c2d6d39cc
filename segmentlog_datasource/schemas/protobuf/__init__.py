"""Protobuf, one home for its facts, shared by decoding (decode/protobuf.py and its
compiled twin protobuf_program.py) and writing (writer/protobuf_schema.py), which keep
only turning payloads into columns and columns into payloads:

- text.py: the .proto text parsed into FileDescriptorProtos (the type numbers and labels,
  ProtobufSchemaError), and printed again as Schema Registry stores it (canonical_text);
- descriptors.py: a text loaded into the runtime's descriptors with the files it imports
  (LoadedProto; a registered schema with its references: LoadedSchema, load_registered),
  its messages by name or by Confluent's message indexes (by_indexes, indexes_of);
- mapping.py: Protobuf's types as Spark's both ways, the Spark type of a message
  (spark-protobuf's SchemaConverters) and the message of a struct column's type
  (derive_message_schema);
- resolution.py: how a value written with one message reads as another (the reader's);
- compatibility.py: the registry's Protobuf diff, checked at its compatibility levels.

The bytes of the message indexes (zig-zag varints) are format/varint.py's, read by
decode/ and written by writer/: nothing here needs them.
"""
