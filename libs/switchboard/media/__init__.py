"""Channel-neutral media storage: copies of customers' files whose provider links expire
(:mod:`switchboard.media.store`), and what a file is from its bytes (:mod:`switchboard.media.sniff`)."""

from switchboard.media.sniff import extension_for, sniff_mime
from switchboard.media.store import STORE_PREFIX, MediaCopyFailed, MediaStore, StoredMedia, is_stored, key_of

__all__ = [
    "STORE_PREFIX",
    "MediaCopyFailed",
    "MediaStore",
    "StoredMedia",
    "extension_for",
    "is_stored",
    "key_of",
    "sniff_mime",
]
