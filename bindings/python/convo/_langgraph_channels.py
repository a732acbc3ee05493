"""How convo.langgraph.ConvoSaver turns LangGraph channel values and pending
writes into stored values, and back: the one place that knows about message
channels, so that they move onto libconvo's log references (issue 24) in one step.

Today every channel, a message channel included, is stored as the serde's typed
value (its (channel, version) once per thread and namespace): correct, but a
message list is stored again with each new version. With log references, a
message channel's plan will carry the new messages and the log_length for the
put, and resolve() will get the channel's items from the library."""

import collections

ChannelPlan = collections.namedtuple("ChannelPlan", "channels messages log_length")
ChannelPlan.__doc__ = """What ConvoSaver.put hands to Store.checkpoint_put: channels as
(name, version text, (type, bytes) or None), messages for the log (appended
with the checkpoint in one atomic write) and the checkpoint's log_length."""


class MessageChannels:
    """The mapping for the channels named message channels (LangGraph's
    `messages` by default). The serde is passed on each call: a saver's serde
    may be replaced (BaseCheckpointSaver.with_allowlist clones the saver)."""

    def __init__(self, names):
        self.names = frozenset(names)

    def plan_put(self, serde, values, versions, new_versions):
        """The channels of a checkpoint: every channel of `versions` with its
        version, and a value for those whose version is new."""
        channels = []
        for name, version in versions.items():
            value = None
            if name in new_versions and name in values:
                value = serde.dumps_typed(values[name])
            channels.append((name, str(version), value))
        return ChannelPlan(channels, (), 0)

    def write_value(self, serde, channel, value):
        """A pending write's stored value."""
        return serde.dumps_typed(value)

    def resolve(self, serde, checkpoint):
        """{channel: value} of a convo.Checkpoint: every channel with a value."""
        return {c.name: serde.loads_typed(c.value) for c in checkpoint.channels
                if c.value is not None}

    def read_write(self, serde, write):
        """The value of a stored pending write (a convo.Write)."""
        return serde.loads_typed(write.value)
