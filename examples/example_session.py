"""The SparkSession an example runs on.

Run as a script, an example starts a local session of its own and stops it at the end.
Called as `main(spark=...)` (as the tests do, on their one session), it runs on that
session, sets its own SQL settings for the run and gives back the ones it found.
"""
import os
import sys


class ExampleSession:
    def __init__(self, spark=None, app_name="segmentlog-example", conf=None):
        self._conf = dict(conf or {})
        self._owned = spark is None
        if self._owned:
            # Spark's Python workers run this interpreter, which has segmentlog installed.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            from pyspark.sql import SparkSession

            builder = (SparkSession.builder.master("local[2]").appName(app_name)
                       .config("spark.ui.enabled", "false")
                       .config("spark.ui.showConsoleProgress", "false"))
            for key, value in self._conf.items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            self._previous = {}
        else:
            self._previous = {key: spark.conf.get(key, None) for key in self._conf}
            for key, value in self._conf.items():
                spark.conf.set(key, value)
        self.spark = spark

    def close(self):
        if self._owned:
            self.spark.stop()
            return
        for key, value in self._previous.items():
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)
