"""Website chat: a widget on the business's own site (one script tag), on the same channel core.

Visitor messages arrive over HTTP (:mod:`.routes`), are normalized (:mod:`.normalize`) and stored by
the same ingest as every webhook; replies are written by the one outbox writer and sent by the one
delivery loop, whose :meth:`~.channel.WebChannel.send` appends them to the visitor's stream
(:mod:`.stream`), which the widget reads over Server-Sent Events. Identity and abuse rules: :mod:`.widgets`.
"""
