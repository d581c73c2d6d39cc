"""Spark settings the package reads and sets, named once (importable without Spark)."""

# Whether Spark pushes filters down into Python data sources (Spark 4.1+).
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
