"""Raw bytes to a real broker: record batches no Kafka client library would build.

kafka-python's producer cannot send a header key that is not UTF-8 (it encodes ``str`` keys)
nor a record batch with a wrong CRC. :func:`record_batch` builds a v2 batch with
kafka-python's own builder, then patches bytes (header keys, the CRC) and recomputes the CRC
unless asked not to; :func:`produce_raw_batch` sends it in one ``ProduceRequest`` (v3, the
first version carrying v2 batches) written on a plain socket, and returns the partition's
error code and base offset from the response.
"""

from __future__ import annotations

import socket
import struct
import time

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

__all__ = ["record_batch", "produce_raw_batch"]

_PRODUCE_API_KEY = 0
_PRODUCE_VERSION = 3


def record_batch(records: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]], *,
                 replace: tuple[bytes, bytes] | None = None, good_crc: bool = True) -> bytes:
    """A v2 record batch of ``(key, value, headers)`` records.

    ``replace`` swaps every occurrence of its first byte string for the second one of the
    same length after building (e.g. a header key ``"KEY"`` for ``b"\\xff\\xfe\\xfd"``);
    the CRC is recomputed over the patched bytes when ``good_crc``, else it is left wrong.
    """
    now = int(time.time() * 1000)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 24)
    for offset, (key, value, headers) in enumerate(records):
        builder.append(offset, timestamp=now, key=key, value=value, headers=headers)
    data = bytearray(builder.build())
    header = DefaultRecordBatch.HEADER_STRUCT.size
    if replace is not None:
        old, new = replace
        if len(old) != len(new) or old not in data[header:]:
            raise ValueError(f"cannot replace {old!r} by {new!r} in the batch")
        data[header:] = bytes(data[header:]).replace(old, new)
    crc = calc_crc32c(memoryview(data)[DefaultRecordBatch.ATTRIBUTES_OFFSET:])
    if not good_crc:
        crc ^= 0x5A5A5A5A
    struct.pack_into(">I", data, DefaultRecordBatch.CRC_OFFSET, crc)
    return bytes(data)


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def produce_raw_batch(bootstrap: str, topic: str, partition: int, batch: bytes,
                      timeout: float = 10.0) -> tuple[int, int]:
    """Send ``batch`` to ``topic``/``partition`` of the broker at ``bootstrap`` (the
    partition's leader: the test brokers have one node); ``(error_code, base_offset)``."""
    host, port = bootstrap.rsplit(":", 1)
    body = (struct.pack(">h", -1)                      # transactional_id: null
            + struct.pack(">hi", -1, int(timeout * 1000))  # acks=all, timeout
            + struct.pack(">i", 1) + _string(topic)
            + struct.pack(">i", 1) + struct.pack(">i", partition)
            + struct.pack(">i", len(batch)) + batch)
    request = (struct.pack(">hhi", _PRODUCE_API_KEY, _PRODUCE_VERSION, 7)
               + _string("streamkm-tests-raw") + body)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read(sock, 4))[0]
        response = _read(sock, size)
    # correlation_id, [topic: name, [partition, error_code, base_offset, ...]]
    pos = 4 + 4
    name_len = struct.unpack_from(">h", response, pos)[0]
    pos += 2 + name_len + 4
    _, error_code, base_offset = struct.unpack_from(">ihq", response, pos)
    return int(error_code), int(base_offset)


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"broker closed the connection after {len(out)} of {n} bytes")
        out.extend(chunk)
    return bytes(out)
