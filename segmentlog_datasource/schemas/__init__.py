"""Schema languages' cores shared by decoding (segmentlog_datasource.decode) and writing
(segmentlog_datasource.writer): parsing a schema's text and loading it, with no Arrow or
Spark mapping and no registry. protobuf_text: .proto text.
"""
