"""A streaming pipeline from one log dir to another through segmentlog's source and sink,
run as a script until it is killed:

    python stream_pipeline_job.py <input log dir> <checkpoint> <output log dir>
"""
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

OUTPUT_TOPIC = "enriched"
PARTITIONS = 3


def pipeline(spark, input_dir, checkpoint, output_dir, trigger, max_offsets="40"):
    source = (spark.readStream.format("segmentlog").option("subscribe", "orders")
              .option("maxOffsetsPerTrigger", max_offsets).load(input_dir))
    enriched = source.select(
        "key", F.concat(F.lit(b"seen:"), "value").alias("value"), "partition", "timestamp")
    return (enriched.writeStream.format("segmentlog").option("checkpointLocation", checkpoint)
            .option("topic", OUTPUT_TOPIC).option("numPartitions", PARTITIONS)
            .trigger(**trigger).start(output_dir))


def main(input_dir, checkpoint, output_dir):
    spark = (SparkSession.builder.master("local[2]").appName("segmentlog-pipeline")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "768m").getOrCreate())
    query = pipeline(spark, input_dir, checkpoint, output_dir,
                     {"processingTime": "100 milliseconds"}, max_offsets="25")
    query.awaitTermination()  # until killed


if __name__ == "__main__":
    main(*sys.argv[1:4])
