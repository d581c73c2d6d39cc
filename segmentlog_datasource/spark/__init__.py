"""The Spark data source: thin adapters over the read layer and the writer engine."""
