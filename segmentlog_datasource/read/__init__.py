"""Reading, free of Spark: read options, planning into fragments that scan themselves, lookups."""
