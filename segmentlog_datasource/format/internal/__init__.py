"""Kafka's internal topics' records: the coordinators' keys and values and KRaft's
metadata records, as Kafka's message definitions lay them out (messages.py)."""
