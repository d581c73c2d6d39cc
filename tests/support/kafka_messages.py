"""Kafka 4.2's definitions of the records of its internal topics, for an independent
reader of them (kafka_reader.py), written out from Apache Kafka's JSON message definitions
(Apache License 2.0; tag 4.2.0-rc1):

- group-coordinator/src/main/resources/common/message: `__consumer_offsets`
- share-coordinator/src/main/resources/common/message: `__share_group_state`
- transaction-coordinator/src/main/resources/common/message: `__transaction_state`
- metadata/src/main/resources/common/metadata: `__cluster_metadata`
- storage/src/main/resources/message: `__remote_log_metadata`

Only what decides how the bytes read is kept: each message's api key, type, valid and
flexible versions, and its fields (Kafka's names, types, versions, nullable versions, tags
and tagged versions, a struct's fields in place), and its common structs. None of it comes
from segmentlog's own tables, which a test checks against these.
"""


def F(name, type, versions, nullable="none", tag=None, tagged="none", fields=None):
    """A field as Kafka's JSON declares it (versions None: its tagged versions)."""
    return {"name": name, "type": type, "versions": versions or tagged,
            "nullable": nullable, "tag": tag, "tagged": tagged, "fields": fields}


def M(api_key, kind, valid, flexible, fields, common=()):
    """A message: api key, type (coordinator-key, coordinator-value, metadata), valid and
    flexible versions, fields, common structs (as fields of type "struct")."""
    return {"apiKey": api_key, "type": kind, "valid": valid, "flexible": flexible or "none",
            "fields": fields, "common": {struct["name"]: struct for struct in common}}


CONSUMER_OFFSETS = {
    'ConsumerGroupCurrentMemberAssignmentKey': M(8, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('MemberId', 'string', '0')
    ]),
    'ConsumerGroupCurrentMemberAssignmentValue': M(8, 'coordinator-value', '0', '0+', [
        F('MemberEpoch', 'int32', '0+'),
        F('PreviousMemberEpoch', 'int32', '0+'),
        F('State', 'int8', '0+'),
        F('AssignedPartitions', '[]TopicPartitions', '0+'),
        F('PartitionsPendingRevocation', '[]TopicPartitions', '0+')
    ], common=[
        F('TopicPartitions', 'struct', '0+', fields=[
            F('TopicId', 'uuid', '0+'),
            F('Partitions', '[]int32', '0+')])
    ]),
    'ConsumerGroupMemberMetadataKey': M(5, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('MemberId', 'string', '0')
    ]),
    'ConsumerGroupMemberMetadataValue': M(5, 'coordinator-value', '0', '0+', [
        F('InstanceId', 'string', '0+', nullable='0+'),
        F('RackId', 'string', '0+', nullable='0+'),
        F('ClientId', 'string', '0+'),
        F('ClientHost', 'string', '0+'),
        F('SubscribedTopicNames', '[]string', '0+'),
        F('SubscribedTopicRegex', 'string', '0+', nullable='0+'),
        F('RebalanceTimeoutMs', 'int32', '0+'),
        F('ServerAssignor', 'string', '0+', nullable='0+'),
        F('ClassicMemberMetadata', 'ClassicMemberMetadata', '0+', nullable='0+', tag=0,
          tagged='0+', fields=[
            F('SessionTimeoutMs', 'int32', '0+'),
            F('SupportedProtocols', '[]ClassicProtocol', '0+', fields=[
                F('Name', 'string', '0+'),
                F('Metadata', 'bytes', '0+')])])
    ]),
    'ConsumerGroupMetadataKey': M(3, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0')
    ]),
    'ConsumerGroupMetadataValue': M(3, 'coordinator-value', '0', '0+', [
        F('Epoch', 'int32', '0+'),
        F('MetadataHash', 'int64', '0+', tag=0, tagged='0+')
    ]),
    'ConsumerGroupPartitionMetadataKey': M(4, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0')
    ]),
    'ConsumerGroupPartitionMetadataValue': M(4, 'coordinator-value', '0', '0+', [
        F('Topics', '[]TopicMetadata', '0+', fields=[
            F('TopicId', 'uuid', '0+'),
            F('TopicName', 'string', '0+'),
            F('NumPartitions', 'int32', '0+'),
            F('PartitionMetadata', '[]PartitionMetadata', '0+', fields=[
                F('Partition', 'int32', '0+'),
                F('Racks', '[]string', '0+')])])
    ]),
    'ConsumerGroupRegularExpressionKey': M(16, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('RegularExpression', 'string', '0')
    ]),
    'ConsumerGroupRegularExpressionValue': M(16, 'coordinator-value', '0', '0+', [
        F('Topics', '[]string', '0+'),
        F('Version', 'int64', '0+'),
        F('Timestamp', 'int64', '0+')
    ]),
    'ConsumerGroupTargetAssignmentMemberKey': M(7, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('MemberId', 'string', '0')
    ]),
    'ConsumerGroupTargetAssignmentMemberValue': M(7, 'coordinator-value', '0', '0+', [
        F('TopicPartitions', '[]TopicPartition', '0+', fields=[
            F('TopicId', 'uuid', '0+'),
            F('Partitions', '[]int32', '0+')])
    ]),
    'ConsumerGroupTargetAssignmentMetadataKey': M(6, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0')
    ]),
    'ConsumerGroupTargetAssignmentMetadataValue': M(6, 'coordinator-value', '0', '0+', [
        F('AssignmentEpoch', 'int32', '0+')
    ]),
    'GroupMetadataKey': M(2, 'coordinator-key', '0', 'none', [
        F('group', 'string', '0')
    ]),
    'GroupMetadataValue': M(2, 'coordinator-value', '0-4', '4+', [
        F('protocolType', 'string', '0+'),
        F('generation', 'int32', '0+'),
        F('protocol', 'string', '0+', nullable='0+'),
        F('leader', 'string', '0+', nullable='0+'),
        F('currentStateTimestamp', 'int64', '2+'),
        F('members', '[]MemberMetadata', '0+')
    ], common=[
        F('MemberMetadata', 'struct', '0+', fields=[
            F('memberId', 'string', '0+'),
            F('groupInstanceId', 'string', '3+', nullable='3+'),
            F('clientId', 'string', '0+'),
            F('clientHost', 'string', '0+'),
            F('rebalanceTimeout', 'int32', '1+'),
            F('sessionTimeout', 'int32', '0+'),
            F('subscription', 'bytes', '0+'),
            F('assignment', 'bytes', '0+')])
    ]),
    'LegacyOffsetCommitKey': M(0, 'coordinator-key', '0', 'none', [
        F('group', 'string', '0'),
        F('topic', 'string', '0'),
        F('partition', 'int32', '0')
    ]),
    'LegacyOffsetCommitValue': M(0, 'coordinator-value', '0', 'none', [
        F('offset', 'int64', '0'),
        F('metadata', 'string', '0'),
        F('commitTimestamp', 'int64', '0')
    ]),
    'OffsetCommitKey': M(1, 'coordinator-key', '0', 'none', [
        F('group', 'string', '0'),
        F('topic', 'string', '0'),
        F('partition', 'int32', '0')
    ]),
    'OffsetCommitValue': M(1, 'coordinator-value', '0-4', '4+', [
        F('offset', 'int64', '0+'),
        F('leaderEpoch', 'int32', '3+'),
        F('metadata', 'string', '0+'),
        F('commitTimestamp', 'int64', '0+'),
        F('expireTimestamp', 'int64', '1'),
        F('topicId', 'uuid', '4+', tag=0, tagged='4+')
    ]),
    'ShareGroupCurrentMemberAssignmentKey': M(14, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('MemberId', 'string', '0')
    ]),
    'ShareGroupCurrentMemberAssignmentValue': M(14, 'coordinator-value', '0', '0+', [
        F('MemberEpoch', 'int32', '0+'),
        F('PreviousMemberEpoch', 'int32', '0+'),
        F('State', 'int8', '0+'),
        F('AssignedPartitions', '[]TopicPartitions', '0+')
    ], common=[
        F('TopicPartitions', 'struct', '0+', fields=[
            F('TopicId', 'uuid', '0+'),
            F('Partitions', '[]int32', '0+')])
    ]),
    'ShareGroupMemberMetadataKey': M(10, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('MemberId', 'string', '0')
    ]),
    'ShareGroupMemberMetadataValue': M(10, 'coordinator-value', '0', '0+', [
        F('RackId', 'string', '0+', nullable='0+'),
        F('ClientId', 'string', '0+'),
        F('ClientHost', 'string', '0+'),
        F('SubscribedTopicNames', '[]string', '0+')
    ]),
    'ShareGroupMetadataKey': M(11, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0')
    ]),
    'ShareGroupMetadataValue': M(11, 'coordinator-value', '0', '0+', [
        F('Epoch', 'int32', '0+'),
        F('MetadataHash', 'int64', '0+')
    ]),
    'ShareGroupStatePartitionMetadataKey': M(15, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0')
    ]),
    'ShareGroupStatePartitionMetadataValue': M(15, 'coordinator-value', '0', '0+', [
        F('InitializingTopics', '[]TopicPartitionsInfo', '0+'),
        F('InitializedTopics', '[]TopicPartitionsInfo', '0+'),
        F('DeletingTopics', '[]TopicInfo', '0+')
    ], common=[
        F('TopicPartitionsInfo', 'struct', '0+', fields=[
            F('TopicId', 'uuid', '0+'),
            F('TopicName', 'string', '0+'),
            F('Partitions', '[]int32', '0+')]),
        F('TopicInfo', 'struct', '0+', fields=[
            F('TopicId', 'uuid', '0+'),
            F('TopicName', 'string', '0+')])
    ]),
    'ShareGroupTargetAssignmentMemberKey': M(13, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('MemberId', 'string', '0')
    ]),
    'ShareGroupTargetAssignmentMemberValue': M(13, 'coordinator-value', '0', '0+', [
        F('TopicPartitions', '[]TopicPartition', '0+', fields=[
            F('TopicId', 'uuid', '0+'),
            F('Partitions', '[]int32', '0+')])
    ]),
    'ShareGroupTargetAssignmentMetadataKey': M(12, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0')
    ]),
    'ShareGroupTargetAssignmentMetadataValue': M(12, 'coordinator-value', '0', '0+', [
        F('AssignmentEpoch', 'int32', '0+')
    ]),
    'StreamsGroupCurrentMemberAssignmentKey': M(22, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('MemberId', 'string', '0')
    ]),
    'StreamsGroupCurrentMemberAssignmentValue': M(22, 'coordinator-value', '0', '0+', [
        F('MemberEpoch', 'int32', '0+'),
        F('PreviousMemberEpoch', 'int32', '0+'),
        F('State', 'int8', '0+'),
        F('ActiveTasks', '[]TaskIds', '0+'),
        F('StandbyTasks', '[]TaskIds', '0+'),
        F('WarmupTasks', '[]TaskIds', '0+'),
        F('ActiveTasksPendingRevocation', '[]TaskIds', '0+'),
        F('StandbyTasksPendingRevocation', '[]TaskIds', '0+'),
        F('WarmupTasksPendingRevocation', '[]TaskIds', '0+')
    ], common=[
        F('TaskIds', 'struct', '0+', fields=[
            F('SubtopologyId', 'string', '0+'),
            F('Partitions', '[]int32', '0+'),
            F('AssignmentEpochs', '[]int32', '0+', nullable='0+', tag=0, tagged='0+')])
    ]),
    'StreamsGroupMemberMetadataKey': M(19, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('MemberId', 'string', '0')
    ]),
    'StreamsGroupMemberMetadataValue': M(19, 'coordinator-value', '0', '0+', [
        F('InstanceId', 'string', '0+', nullable='0+'),
        F('RackId', 'string', '0+', nullable='0+'),
        F('ClientId', 'string', '0+'),
        F('ClientHost', 'string', '0+'),
        F('RebalanceTimeoutMs', 'int32', '0+'),
        F('TopologyEpoch', 'int32', '0+'),
        F('ProcessId', 'string', '0+'),
        F('UserEndpoint', 'Endpoint', '0+', nullable='0+'),
        F('ClientTags', '[]KeyValue', '0+')
    ], common=[
        F('Endpoint', 'struct', '0+', fields=[
            F('Host', 'string', '0+'),
            F('Port', 'uint16', '0+')]),
        F('KeyValue', 'struct', '0+', fields=[
            F('Key', 'string', '0+'),
            F('Value', 'string', '0+')])
    ]),
    'StreamsGroupMetadataKey': M(17, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0')
    ]),
    'StreamsGroupMetadataValue': M(17, 'coordinator-value', '0', '0+', [
        F('Epoch', 'int32', '0+'),
        F('MetadataHash', 'int64', '0+'),
        F('ValidatedTopologyEpoch', 'int32', '0+', tag=0, tagged='0+'),
        F('LastAssignmentConfigs', '[]LastAssignmentConfig', None, nullable='0+', tag=1,
          tagged='0+')
    ], common=[
        F('LastAssignmentConfig', 'struct', '0+', fields=[
            F('Key', 'string', '0+'),
            F('Value', 'string', '0+')])
    ]),
    'StreamsGroupTargetAssignmentMemberKey': M(21, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('MemberId', 'string', '0')
    ]),
    'StreamsGroupTargetAssignmentMemberValue': M(21, 'coordinator-value', '0', '0+', [
        F('ActiveTasks', '[]TaskIds', '0+'),
        F('StandbyTasks', '[]TaskIds', '0+'),
        F('WarmupTasks', '[]TaskIds', '0+')
    ], common=[
        F('TaskIds', 'struct', '0+', fields=[
            F('SubtopologyId', 'string', '0+'),
            F('Partitions', '[]int32', '0+')])
    ]),
    'StreamsGroupTargetAssignmentMetadataKey': M(20, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0')
    ]),
    'StreamsGroupTargetAssignmentMetadataValue': M(20, 'coordinator-value', '0', '0+', [
        F('AssignmentEpoch', 'int32', '0+')
    ]),
    'StreamsGroupTopologyKey': M(23, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0')
    ]),
    'StreamsGroupTopologyValue': M(23, 'coordinator-value', '0', '0+', [
        F('Epoch', 'int32', '0+'),
        F('Subtopologies', '[]Subtopology', '0+', fields=[
            F('SubtopologyId', 'string', '0+'),
            F('SourceTopics', '[]string', '0+'),
            F('SourceTopicRegex', '[]string', '0+'),
            F('StateChangelogTopics', '[]TopicInfo', '0+'),
            F('RepartitionSinkTopics', '[]string', '0+'),
            F('RepartitionSourceTopics', '[]TopicInfo', '0+'),
            F('CopartitionGroups', '[]CopartitionGroup', '0+', fields=[
                F('SourceTopics', '[]int16', '0+'),
                F('SourceTopicRegex', '[]int16', '0+'),
                F('RepartitionSourceTopics', '[]int16', '0+')])])
    ], common=[
        F('TopicConfig', 'struct', '0+', fields=[
            F('key', 'string', '0+'),
            F('value', 'string', '0+')]),
        F('TopicInfo', 'struct', '0+', fields=[
            F('Name', 'string', '0+'),
            F('Partitions', 'int32', '0+'),
            F('ReplicationFactor', 'int16', '0+'),
            F('TopicConfigs', '[]TopicConfig', '0+')])
    ]),
}

SHARE_GROUP_STATE = {
    'ShareSnapshotKey': M(0, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('TopicId', 'uuid', '0'),
        F('Partition', 'int32', '0')
    ]),
    'ShareSnapshotValue': M(0, 'coordinator-value', '0', '0+', [
        F('SnapshotEpoch', 'int32', '0+'),
        F('StateEpoch', 'int32', '0+'),
        F('LeaderEpoch', 'int32', '0+'),
        F('StartOffset', 'int64', '0+'),
        F('DeliveryCompleteCount', 'int32', '0+', tag=0, tagged='0+'),
        F('CreateTimestamp', 'int64', '0+'),
        F('WriteTimestamp', 'int64', '0+'),
        F('StateBatches', '[]StateBatch', '0+', fields=[
            F('FirstOffset', 'int64', '0+'),
            F('LastOffset', 'int64', '0+'),
            F('DeliveryState', 'int8', '0+'),
            F('DeliveryCount', 'int16', '0+')])
    ]),
    'ShareUpdateKey': M(1, 'coordinator-key', '0', 'none', [
        F('GroupId', 'string', '0'),
        F('TopicId', 'uuid', '0'),
        F('Partition', 'int32', '0')
    ]),
    'ShareUpdateValue': M(1, 'coordinator-value', '0', '0+', [
        F('SnapshotEpoch', 'int32', '0+'),
        F('LeaderEpoch', 'int32', '0+'),
        F('StartOffset', 'int64', '0+'),
        F('DeliveryCompleteCount', 'int32', '0+', tag=0, tagged='0+'),
        F('StateBatches', '[]StateBatch', '0+', fields=[
            F('FirstOffset', 'int64', '0+'),
            F('LastOffset', 'int64', '0+'),
            F('DeliveryState', 'int8', '0+'),
            F('DeliveryCount', 'int16', '0+')])
    ]),
}

TRANSACTION_STATE = {
    'TransactionLogKey': M(0, 'coordinator-key', '0', 'none', [
        F('TransactionalId', 'string', '0')
    ]),
    'TransactionLogValue': M(0, 'coordinator-value', '0-1', '1+', [
        F('ProducerId', 'int64', '0+'),
        F('PreviousProducerId', 'int64', None, tag=0, tagged='1+'),
        F('NextProducerId', 'int64', None, tag=1, tagged='1+'),
        F('ProducerEpoch', 'int16', '0+'),
        F('NextProducerEpoch', 'int16', None, tag=3, tagged='1+'),
        F('TransactionTimeoutMs', 'int32', '0+'),
        F('TransactionStatus', 'int8', '0+'),
        F('TransactionPartitions', '[]PartitionsSchema', '0+', nullable='0+', fields=[
            F('Topic', 'string', '0+'),
            F('PartitionIds', '[]int32', '0+')]),
        F('TransactionLastUpdateTimestampMs', 'int64', '0+'),
        F('TransactionStartTimestampMs', 'int64', '0+'),
        F('ClientTransactionVersion', 'int16', None, tag=2, tagged='1+')
    ]),
}

CLUSTER_METADATA = {
    'AbortTransactionRecord': M(25, 'metadata', '0', '0+', [
        F('Reason', 'string', '0+', nullable='0+', tag=0, tagged='0+')
    ]),
    'AccessControlEntryRecord': M(18, 'metadata', '0', '0+', [
        F('Id', 'uuid', '0+'),
        F('ResourceType', 'int8', '0+'),
        F('ResourceName', 'string', '0+'),
        F('PatternType', 'int8', '0+'),
        F('Principal', 'string', '0+'),
        F('Host', 'string', '0+'),
        F('Operation', 'int8', '0+'),
        F('PermissionType', 'int8', '0+')
    ]),
    'BeginTransactionRecord': M(23, 'metadata', '0', '0+', [
        F('Name', 'string', '0+', nullable='0+', tag=0, tagged='0+')
    ]),
    'BrokerRegistrationChangeRecord': M(17, 'metadata', '0-2', '0+', [
        F('BrokerId', 'int32', '0+'),
        F('BrokerEpoch', 'int64', '0+'),
        F('Fenced', 'int8', '0+', tag=0, tagged='0+'),
        F('InControlledShutdown', 'int8', '1+', tag=1, tagged='1+'),
        F('LogDirs', '[]uuid', '2+', tag=2, tagged='2+')
    ]),
    'ClearElrRecord': M(28, 'metadata', '0', '0+', [
        F('TopicName', 'string', '0+')
    ]),
    'ClientQuotaRecord': M(14, 'metadata', '0', '0+', [
        F('Entity', '[]EntityData', '0+', fields=[
            F('EntityType', 'string', '0+'),
            F('EntityName', 'string', '0+', nullable='0+')]),
        F('Key', 'string', '0+'),
        F('Value', 'float64', '0+'),
        F('Remove', 'bool', '0+')
    ]),
    'ConfigRecord': M(4, 'metadata', '0', '0+', [
        F('ResourceType', 'int8', '0+'),
        F('ResourceName', 'string', '0+'),
        F('Name', 'string', '0+'),
        F('Value', 'string', '0+', nullable='0+')
    ]),
    'DelegationTokenRecord': M(10, 'metadata', '0', '0+', [
        F('Owner', 'string', '0+'),
        F('Requester', 'string', '0+'),
        F('Renewers', '[]string', '0+'),
        F('IssueTimestamp', 'int64', '0+'),
        F('MaxTimestamp', 'int64', '0+'),
        F('ExpirationTimestamp', 'int64', '0+'),
        F('TokenId', 'string', '0+')
    ]),
    'EndTransactionRecord': M(24, 'metadata', '0', '0+', [

    ]),
    'FeatureLevelRecord': M(12, 'metadata', '0', '0+', [
        F('Name', 'string', '0+'),
        F('FeatureLevel', 'int16', '0+')
    ]),
    'FenceBrokerRecord': M(7, 'metadata', '0', '0+', [
        F('Id', 'int32', '0+'),
        F('Epoch', 'int64', '0+')
    ]),
    'NoOpRecord': M(20, 'metadata', '0', '0+', [

    ]),
    'PartitionChangeRecord': M(5, 'metadata', '0-2', '0+', [
        F('PartitionId', 'int32', '0+'),
        F('TopicId', 'uuid', '0+'),
        F('Isr', '[]int32', '0+', nullable='0+', tag=0, tagged='0+'),
        F('Leader', 'int32', '0+', tag=1, tagged='0+'),
        F('Replicas', '[]int32', '0+', nullable='0+', tag=2, tagged='0+'),
        F('RemovingReplicas', '[]int32', '0+', nullable='0+', tag=3, tagged='0+'),
        F('AddingReplicas', '[]int32', '0+', nullable='0+', tag=4, tagged='0+'),
        F('LeaderRecoveryState', 'int8', '0+', tag=5, tagged='0+'),
        F('Directories', '[]uuid', '1+', nullable='1+', tag=8, tagged='1+'),
        F('EligibleLeaderReplicas', '[]int32', '2+', nullable='2+', tag=6, tagged='2+'),
        F('LastKnownElr', '[]int32', '2+', nullable='2+', tag=7, tagged='2+')
    ]),
    'PartitionRecord': M(3, 'metadata', '0-2', '0+', [
        F('PartitionId', 'int32', '0+'),
        F('TopicId', 'uuid', '0+'),
        F('Replicas', '[]int32', '0+'),
        F('Isr', '[]int32', '0+'),
        F('RemovingReplicas', '[]int32', '0+'),
        F('AddingReplicas', '[]int32', '0+'),
        F('Leader', 'int32', '0+'),
        F('LeaderRecoveryState', 'int8', '0+', tag=0, tagged='0+'),
        F('LeaderEpoch', 'int32', '0+'),
        F('PartitionEpoch', 'int32', '0+'),
        F('Directories', '[]uuid', '1+'),
        F('EligibleLeaderReplicas', '[]int32', '2+', nullable='2+', tag=1, tagged='2+'),
        F('LastKnownElr', '[]int32', '2+', nullable='2+', tag=2, tagged='2+')
    ]),
    'ProducerIdsRecord': M(15, 'metadata', '0', '0+', [
        F('BrokerId', 'int32', '0+'),
        F('BrokerEpoch', 'int64', '0+'),
        F('NextProducerId', 'int64', '0+')
    ]),
    'RegisterBrokerRecord': M(0, 'metadata', '0-3', '0+', [
        F('BrokerId', 'int32', '0+'),
        F('IsMigratingZkBroker', 'bool', '2+'),
        F('IncarnationId', 'uuid', '0+'),
        F('BrokerEpoch', 'int64', '0+'),
        F('EndPoints', '[]BrokerEndpoint', '0+', fields=[
            F('Name', 'string', '0+'),
            F('Host', 'string', '0+'),
            F('Port', 'uint16', '0+'),
            F('SecurityProtocol', 'int16', '0+')]),
        F('Features', '[]BrokerFeature', '0+', fields=[
            F('Name', 'string', '0+'),
            F('MinSupportedVersion', 'int16', '0+'),
            F('MaxSupportedVersion', 'int16', '0+')]),
        F('Rack', 'string', '0+', nullable='0+'),
        F('Fenced', 'bool', '0+'),
        F('InControlledShutdown', 'bool', '1+'),
        F('LogDirs', '[]uuid', '3+', tag=0, tagged='3+')
    ]),
    'RegisterControllerRecord': M(27, 'metadata', '0', '0+', [
        F('ControllerId', 'int32', '0+'),
        F('IncarnationId', 'uuid', '0+'),
        F('ZkMigrationReady', 'bool', '0+'),
        F('EndPoints', '[]ControllerEndpoint', '0+', fields=[
            F('Name', 'string', '0+'),
            F('Host', 'string', '0+'),
            F('Port', 'uint16', '0+'),
            F('SecurityProtocol', 'int16', '0+')]),
        F('Features', '[]ControllerFeature', '0+', fields=[
            F('Name', 'string', '0+'),
            F('MinSupportedVersion', 'int16', '0+'),
            F('MaxSupportedVersion', 'int16', '0+')])
    ]),
    'RemoveAccessControlEntryRecord': M(19, 'metadata', '0', '0+', [
        F('Id', 'uuid', '0+')
    ]),
    'RemoveDelegationTokenRecord': M(26, 'metadata', '0', '0+', [
        F('TokenId', 'string', '0+')
    ]),
    'RemoveTopicRecord': M(9, 'metadata', '0', '0+', [
        F('TopicId', 'uuid', '0+')
    ]),
    'RemoveUserScramCredentialRecord': M(22, 'metadata', '0', '0+', [
        F('Name', 'string', '0+'),
        F('Mechanism', 'int8', '0+')
    ]),
    'TopicRecord': M(2, 'metadata', '0', '0+', [
        F('Name', 'string', '0+'),
        F('TopicId', 'uuid', '0+')
    ]),
    'UnfenceBrokerRecord': M(8, 'metadata', '0', '0+', [
        F('Id', 'int32', '0+'),
        F('Epoch', 'int64', '0+')
    ]),
    'UnregisterBrokerRecord': M(1, 'metadata', '0', '0+', [
        F('BrokerId', 'int32', '0+'),
        F('BrokerEpoch', 'int64', '0+')
    ]),
    'UserScramCredentialRecord': M(11, 'metadata', '0', '0+', [
        F('Name', 'string', '0+'),
        F('Mechanism', 'int8', '0+'),
        F('Salt', 'bytes', '0+'),
        F('StoredKey', 'bytes', '0+'),
        F('ServerKey', 'bytes', '0+'),
        F('Iterations', 'int32', '0+')
    ]),
    'ZkMigrationStateRecord': M(21, 'metadata', '0', '0+', [
        F('ZkMigrationState', 'int8', '0+')
    ]),
}

REMOTE_LOG_METADATA = {
    'RemoteLogSegmentMetadataRecord': M(0, 'metadata', '0', '0+', [
        F('RemoteLogSegmentId', 'RemoteLogSegmentIdEntry', '0+', fields=[
            F('TopicIdPartition', 'TopicIdPartitionEntry', '0+', fields=[
                F('Name', 'string', '0+'),
                F('Id', 'uuid', '0+'),
                F('Partition', 'int32', '0+')]),
            F('Id', 'uuid', '0+')]),
        F('StartOffset', 'int64', '0+'),
        F('EndOffset', 'int64', '0+'),
        F('BrokerId', 'int32', '0+'),
        F('MaxTimestampMs', 'int64', '0+'),
        F('EventTimestampMs', 'int64', '0+'),
        F('SegmentLeaderEpochs', '[]SegmentLeaderEpochEntry', '0+', fields=[
            F('LeaderEpoch', 'int32', '0+'),
            F('Offset', 'int64', '0+')]),
        F('SegmentSizeInBytes', 'int32', '0+'),
        F('CustomMetadata', 'bytes', '0+', nullable='0+'),
        F('RemoteLogSegmentState', 'int8', '0+'),
        F('TxnIndexEmpty', 'bool', '0+', tag=0, tagged='0+')
    ]),
    'RemoteLogSegmentMetadataSnapshotRecord': M(3, 'metadata', '0', '0+', [
        F('SegmentId', 'uuid', '0+'),
        F('StartOffset', 'int64', '0+'),
        F('EndOffset', 'int64', '0+'),
        F('BrokerId', 'int32', '0+'),
        F('MaxTimestampMs', 'int64', '0+'),
        F('EventTimestampMs', 'int64', '0+'),
        F('SegmentLeaderEpochs', '[]SegmentLeaderEpochEntry', '0+', fields=[
            F('LeaderEpoch', 'int32', '0+'),
            F('Offset', 'int64', '0+')]),
        F('SegmentSizeInBytes', 'int32', '0+'),
        F('CustomMetadata', 'bytes', '0+', nullable='0+'),
        F('RemoteLogSegmentState', 'int8', '0+'),
        F('TxnIndexEmpty', 'bool', '0+', tag=0, tagged='0+')
    ]),
    'RemoteLogSegmentMetadataUpdateRecord': M(1, 'metadata', '0', '0+', [
        F('RemoteLogSegmentId', 'RemoteLogSegmentIdEntry', '0+', fields=[
            F('TopicIdPartition', 'TopicIdPartitionEntry', '0+', fields=[
                F('Name', 'string', '0+'),
                F('Id', 'uuid', '0+'),
                F('Partition', 'int32', '0+')]),
            F('Id', 'uuid', '0+')]),
        F('BrokerId', 'int32', '0+'),
        F('EventTimestampMs', 'int64', '0+'),
        F('CustomMetadata', 'bytes', '0+', nullable='0+'),
        F('RemoteLogSegmentState', 'int8', '0+')
    ]),
    'RemotePartitionDeleteMetadataRecord': M(2, 'metadata', '0', '0+', [
        F('TopicIdPartition', 'TopicIdPartitionEntry', '0+', fields=[
            F('Name', 'string', '0+'),
            F('Id', 'uuid', '0+'),
            F('Partition', 'int32', '0+')]),
        F('BrokerId', 'int32', '0+'),
        F('EventTimestampMs', 'int64', '0+'),
        F('RemotePartitionDeleteState', 'int8', '0+')
    ]),
}

TOPICS = {
    "__consumer_offsets": CONSUMER_OFFSETS,
    "__share_group_state": SHARE_GROUP_STATE,
    "__transaction_state": TRANSACTION_STATE,
    "__cluster_metadata": CLUSTER_METADATA,
    "__remote_log_metadata": REMOTE_LOG_METADATA,
}
