"""A second, independent decoder of a snapshot's framework layer (docs/FORMAT.md: META, FAILURE,
FRAMEWORK, PROBES), for tests: it reads the file as the format document says and prints one JSON summary.
Any record that does not consume its body exactly, or any read past the end, is an error (exit 2).

    python3 tests/py/fwdecode.py FILE.oomt
"""
import ctypes
import json
import struct
import sys

SEC_META, SEC_FAILURE, SEC_FRAMEWORK, SEC_PROBES = 1, 3, 18, 19
KINDS = {1: "INFO", 2: "STATS", 3: "SETTINGS", 4: "SEGMENTS", 5: "BLOCKS", 6: "ARRAYS", 7: "ERROR",
         8: "BLOCK_FRAMES", 9: "ROLES", 10: "STEPS"}


class Bad(Exception):
    pass


class Cur:
    def __init__(self, b):
        self.b, self.i = b, 0

    def uv(self):
        v = shift = 0
        while True:
            if self.i >= len(self.b) or shift > 63:
                raise Bad("varint past the end")
            c = self.b[self.i]
            self.i += 1
            v |= (c & 0x7F) << shift
            if not c & 0x80:
                return v
            shift += 7

    def sv(self):
        v = self.uv()
        return (v >> 1) ^ -(v & 1)

    def raw(self, n):
        if n > len(self.b) - self.i:
            raise Bad("bytes past the end")
        r = self.b[self.i:self.i + n]
        self.i += n
        return r

    def str(self):
        return self.raw(self.uv()).decode("utf-8", "replace")

    def u64(self, n):
        return list(struct.unpack("<%dQ" % n, self.raw(8 * n)))

    def done(self):
        return self.i == len(self.b)


def sections(path):
    data = open(path, "rb").read()
    if data[:8] != b"OOMTRACE":
        raise Bad("not a snapshot")
    major, minor = struct.unpack_from("<HH", data, 8)
    zstd = ctypes.CDLL("libzstd.so.1")
    zstd.ZSTD_decompress.restype = ctypes.c_size_t
    zstd.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    zstd.ZSTD_isError.argtypes = [ctypes.c_size_t]
    off, out = 32, []
    while off < len(data):
        typ, flags, stored, raw = struct.unpack_from("<IIQQ", data, off)
        off += 24
        body = data[off:off + stored]
        off += stored
        if flags & 1:
            dst = ctypes.create_string_buffer(raw)
            n = zstd.ZSTD_decompress(dst, raw, body, len(body))
            if zstd.ZSTD_isError(n) or n != raw:
                raise Bad("section %d does not decompress" % typ)
            body = dst.raw[:raw]
        out.append((typ, body))
    return (major, minor), out


def framework(body):
    c = Cur(body)
    layout = c.uv()
    n = c.uv()
    recs = []
    for _ in range(n):
        kind = c.uv()
        r = Cur(c.raw(c.uv()))
        d = {"kind": KINDS.get(kind, kind)}
        if kind == 1:
            d.update(framework=r.str(), version=r.str(), reason=r.str(), taken_ns=r.uv(), collect_ns=r.uv())
        elif kind == 2:
            d.update(framework=r.str(), device=r.uv())
            d["stats"] = dict((r.str(), r.sv()) for _ in range(r.uv()))
        elif kind == 3:
            d.update(framework=r.str())
            d["settings"] = dict((r.str(), r.str()) for _ in range(r.uv()))
        elif kind == 4:
            d.update(framework=r.str())
            m = r.uv()
            names = ("device", "address", "total_size", "allocated_size", "requested_size", "stream",
                     "pool_id", "flags", "first_block", "n_blocks")
            d["segments"] = dict((k, r.u64(m)) for k in names)
        elif kind == 5:
            d.update(framework=r.str())
            m = r.uv()
            d["blocks"] = dict((k, r.u64(m)) for k in ("address", "size", "requested_size", "state", "segment"))
        elif kind == 6:
            d.update(framework=r.str())
            d["arrays"] = [dict(dtype=r.str(), shape=r.str(), device=r.uv(), count=r.uv(), bytes=r.uv())
                           for _ in range(r.uv())]
        elif kind == 7:
            d.update(framework=r.str(), text=r.str(), device=r.uv(), request=r.uv())
        elif kind == 8:
            d.update(framework=r.str())
            d["frames"] = [dict(block=r.uv(), frames=[(r.str(), r.uv(), r.str()) for _ in range(r.uv())])
                           for _ in range(r.uv())]
        elif kind == 9:
            d.update(framework=r.str())
            d["labels"] = [(r.uv(), r.str()) for _ in range(r.uv())]
            m = r.uv()
            d["roles"] = dict((k, r.u64(m)) for k in ("address", "bytes", "label"))
        elif kind == 10:
            d.update(framework=r.str())
            d["steps"] = [dict(step=r.uv(), t_ns=r.uv(), allocated=r.uv(), reserved=r.uv(), shapes=r.str())
                          for _ in range(r.uv())]
        else:
            r.i = len(r.b)
        if not r.done():
            raise Bad("FRAMEWORK record %s: %d bytes left over" % (d["kind"], len(r.b) - r.i))
        recs.append(d)
    if not c.done():
        raise Bad("FRAMEWORK: bytes after the last record")
    return {"layout": layout, "records": recs}


def decode(path):
    version, secs = sections(path)
    out = {"version": list(version), "sections": [t for t, _ in secs]}
    for typ, body in secs:
        c = Cur(body)
        if typ == SEC_META:
            out["tracer"] = c.str()
            out["trigger"] = c.uv()
            out["reason"] = c.str()
        elif typ == SEC_FAILURE:
            out["failure"] = dict(api=c.uv(), category=c.uv(), device=c.sv(), requested=c.uv(), result=c.uv())
        elif typ == SEC_FRAMEWORK:
            out["framework"] = framework(body)
        elif typ == SEC_PROBES:
            out["probes"] = [dict(file=c.str(), failure_seq=c.uv(), requested=c.uv(), device=c.uv())
                             for _ in range(c.uv())]
            if not c.done():
                raise Bad("PROBES: bytes left over")
    return out


if __name__ == "__main__":
    try:
        print(json.dumps(decode(sys.argv[1]), sort_keys=True))
    except (Bad, struct.error, OSError) as e:
        print("fwdecode: %s: %s" % (sys.argv[1], e), file=sys.stderr)
        sys.exit(2)
