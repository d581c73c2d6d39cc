"""The internal topics that can be decoded, by the value of the `decode` read option that
selects each (consumerOffsets, shareGroupState, transactionState, clusterMetadata,
remoteLogMetadata).

Each topic's module defines its InternalTopic; this module, which nothing among them
imports, gathers them.
"""
import functools
from typing import Dict

from .topics import InternalTopic


@functools.lru_cache(maxsize=None)
def internal_topics() -> Dict[str, InternalTopic]:
    """Every decodable internal topic by its `decode` option value (the record tables load
    on first use)."""
    from .group_records import CONSUMER_OFFSETS
    from .metadata_records import CLUSTER_METADATA
    from .remote_log_metadata import REMOTE_LOG_METADATA
    from .share_records import SHARE_GROUP_STATE
    from .transaction_records import TRANSACTION_STATE

    topics = (CONSUMER_OFFSETS, SHARE_GROUP_STATE, TRANSACTION_STATE, CLUSTER_METADATA,
              REMOTE_LOG_METADATA)
    return {topic.option_value: topic for topic in topics}
