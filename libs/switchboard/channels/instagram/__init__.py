"""Instagram Direct channel: webhook spec, normalize, the Channel adapter (Send API), sandbox, CLI,
tenant settings. Media links expire, so bytes are copied at ingest (:mod:`switchboard.media`)."""
