"""Store backends behind one interface: the file-locked JSONL log and an in-memory twin."""

from loopx.store.base import MAX_BATCH_BYTES, MAX_RECORD_BYTES, Cursor, Record, Store, seal
from loopx.store.file import FileStore
from loopx.store.memory import MemoryStore

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
