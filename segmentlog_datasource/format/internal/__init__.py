"""Kafka's internal topics' records: the coordinators' keys and values, KRaft's metadata
records and tiered storage's remote log metadata, as Kafka's message definitions lay them
out (messages.py)."""
