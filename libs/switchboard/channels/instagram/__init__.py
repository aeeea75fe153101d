"""Instagram Direct channel: webhook spec, normalize, the Channel adapter (Send API), CLI,
tenant settings (its sandbox is :mod:`switchboard.standins.instagram`). Media links expire, so bytes are copied at ingest (:mod:`switchboard.media`)."""
