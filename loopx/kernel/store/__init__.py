"""Store backends behind one interface: the file-locked JSONL log and an in-memory twin."""

from loopx.kernel.store.base import (
    MAX_BATCH_BYTES,
    MAX_RECORD_BYTES,
    Cursor,
    Record,
    Store,
    seal,
)
from loopx.kernel.store.file import FileStore
from loopx.kernel.store.memory import MemoryStore

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_RECORD_BYTES",
    "Cursor",
    "FileStore",
    "MemoryStore",
    "Record",
    "Store",
    "seal",
]
