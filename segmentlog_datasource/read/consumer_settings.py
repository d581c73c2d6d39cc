"""The Kafka consumer settings a `kafka.<setting>` read option may name.

Spark's Kafka source hands `kafka.*` options to a Kafka consumer; segmentlog reads no
broker, so it honours only `kafka.isolation.level` and `kafka.exclude.internal.topics`
and ignores the others. A name that is no consumer setting is refused, so a typo is not
silently dropped. The names are those Kafka's `ConsumerConfig` defines (with
`CommonClientConfigs`), and the client SSL and SASL settings it adds
(`SslConfigs.addClientSslSupport`, `SaslConfigs.addClientSaslSupport`), in the Kafka 3
and 4 clients.
"""
import difflib

CONSUMER_SETTINGS = frozenset({
    # ConsumerConfig and CommonClientConfigs
    "allow.auto.create.topics", "auto.commit.interval.ms", "auto.include.jmx.reporter",
    "auto.offset.reset", "bootstrap.servers", "check.crcs", "client.dns.lookup",
    "client.id", "client.rack", "connections.max.idle.ms", "default.api.timeout.ms",
    "enable.auto.commit", "enable.metrics.push", "exclude.internal.topics",
    "fetch.max.bytes", "fetch.max.wait.ms", "fetch.min.bytes", "group.id",
    "group.instance.id", "group.protocol", "group.remote.assignor",
    "heartbeat.interval.ms", "interceptor.classes", "isolation.level", "key.deserializer",
    "max.partition.fetch.bytes", "max.poll.interval.ms", "max.poll.records",
    "metadata.max.age.ms", "metadata.recovery.rebootstrap.trigger.ms",
    "metadata.recovery.strategy", "metric.reporters", "metrics.num.samples",
    "metrics.recording.level", "metrics.sample.window.ms", "partition.assignment.strategy",
    "receive.buffer.bytes", "reconnect.backoff.max.ms", "reconnect.backoff.ms",
    "request.timeout.ms", "retry.backoff.max.ms", "retry.backoff.ms",
    "security.protocol", "security.providers", "send.buffer.bytes",
    "session.timeout.ms", "socket.connection.setup.timeout.max.ms",
    "socket.connection.setup.timeout.ms", "value.deserializer",
    # SslConfigs.addClientSslSupport
    "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class", "ssl.key.password", "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.type",
    # SaslConfigs.addClientSaslSupport
    "sasl.client.callback.handler.class", "sasl.jaas.config", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.callback.handler.class", "sasl.login.class", "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.retry.backoff.max.ms",
    "sasl.login.retry.backoff.ms", "sasl.mechanism",
    "sasl.oauthbearer.access.token.retriever.class",
    "sasl.oauthbearer.access.token.validator.class", "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.header.urlencode", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.token.endpoint.url",
})
# Kafka releases add SSL and SASL (OAuth) settings often; one of those families that is
# not listed above is taken as a newer setting, unless it is a near miss of a listed one.
SECURITY_FAMILIES = ("ssl.", "sasl.")


def is_consumer_setting(setting: str) -> bool:
    """Whether `setting` (without the `kafka.` prefix, any case) names a consumer setting."""
    name = setting.lower()
    if name in CONSUMER_SETTINGS:
        return True
    if name.startswith(SECURITY_FAMILIES):
        return not difflib.get_close_matches(name, CONSUMER_SETTINGS, n=1, cutoff=0.75)
    return False
