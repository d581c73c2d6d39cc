"""Protobuf, one home for its facts, shared by decoding (decode/protobuf.py,
protobuf_program.py) and writing (writer/protobuf_schema.py):

- text.py: the .proto text parsed into FileDescriptorProtos (the type numbers and labels,
  ProtobufSchemaError), and printed again as Schema Registry stores it (canonical_text);
- descriptors.py: a text loaded into the runtime's descriptors with the files it imports
  (LoadedProto; a registered schema with its references, LoadedSchema), its messages by
  name or by Confluent's message indexes.
"""
