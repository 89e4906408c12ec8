"""The projection (daemon/cache): events folded into cluster state, frozen into ClusterSnapshots."""

from fumarole.daemon.cache.load import SNAPSHOT_NAME, fold_log, load, load_projection, save, save_projection
from fumarole.daemon.cache.projection import Projection, session_id
from fumarole.daemon.cache.snapshot_codec import (
    SnapshotFormatError,
    decode_projection,
    encode_projection,
    state_image,
)

__all__ = [
    "SNAPSHOT_NAME",
    "Projection",
    "SnapshotFormatError",
    "decode_projection",
    "encode_projection",
    "fold_log",
    "load",
    "load_projection",
    "save",
    "save_projection",
    "session_id",
    "state_image",
]
