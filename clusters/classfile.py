"""Which jar of a Kafka distribution holds a class, and which methods the class declares.

Read from the jars in the host's cache (clusters/kafka_dist.py), the same jars the nodes run, so
a fault kind can tell before it touches a node whether that node's version has the method it
hooks. Only the class file's constant pool and method table are read (JVM spec, chapter 4): no
JVM, no javap.
"""

from __future__ import annotations

import struct
import zipfile
from functools import lru_cache
from pathlib import Path

from clusters.errors import ClusterError

_MAGIC = 0xCAFEBABE
# Constant pool entry sizes after the tag byte (JVM spec 4.4), except Utf8 (u2 length + bytes).
_CP_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2}
_CP_SIZES |= {17: 4, 18: 4, 19: 2, 20: 2}


class ClassFileError(ClusterError):
    """A class file this reader cannot parse."""


def method_names(data: bytes) -> set[str]:
    """The names of the methods a class file declares (constructors are ``<init>``)."""
    try:
        return _method_names(data)
    except (struct.error, IndexError, KeyError) as exc:
        raise ClassFileError(f"not a readable class file: {type(exc).__name__} {exc}") from None


def _method_names(data: bytes) -> set[str]:
    magic, count = struct.unpack_from(">I4xH", data, 0)
    if magic != _MAGIC:
        raise ClassFileError("not a class file (bad magic)")
    pos, utf8, i = 10, {}, 1
    while i < count:
        tag = data[pos]
        pos += 1
        if tag == 1:
            (length,) = struct.unpack_from(">H", data, pos)
            utf8[i] = data[pos + 2 : pos + 2 + length].decode("utf-8", errors="replace")
            pos += 2 + length
        else:
            pos += _CP_SIZES[tag]
        # Long and Double take two slots of the pool (JVM spec 4.4.5).
        i += 2 if tag in (5, 6) else 1
    pos += 6  # access flags, this class, super class
    (interfaces,) = struct.unpack_from(">H", data, pos)
    pos += 2 + 2 * interfaces
    names: set[str] = set()
    for table in ("fields", "methods"):
        (members,) = struct.unpack_from(">H", data, pos)
        pos += 2
        for _ in range(members):
            _, name_index, _, attrs = struct.unpack_from(">HHHH", data, pos)
            pos += 8
            for _ in range(attrs):
                (length,) = struct.unpack_from(">2xI", data, pos)
                pos += 6 + length
            if table == "methods":
                names.add(utf8[name_index])
    return names


@lru_cache(maxsize=16)
def class_index(libs: Path) -> dict[str, str]:
    """Every class of the jars in ``libs``: binary name (``a.b.Outer$Inner``) -> jar file name.
    Cached per directory: a version's jars never change once assembled."""
    if not libs.is_dir():
        raise ClusterError(f"no Kafka jars at {libs}")
    index: dict[str, str] = {}
    for jar in sorted(libs.glob("*.jar")):
        with zipfile.ZipFile(jar) as zf:
            for name in zf.namelist():
                if name.endswith(".class") and not name.startswith("META-INF/"):
                    index.setdefault(name[:-6].replace("/", "."), jar.name)
    return index


@lru_cache(maxsize=256)
def declared_methods(libs: Path, class_name: str) -> tuple[str, frozenset[str]] | None:
    """The jar holding ``class_name`` among ``libs`` and the methods it declares; None if no jar
    there has the class."""
    jar = class_index(libs).get(class_name)
    if jar is None:
        return None
    with zipfile.ZipFile(libs / jar) as zf:
        data = zf.read(class_name.replace(".", "/") + ".class")
    return jar, frozenset(method_names(data))
