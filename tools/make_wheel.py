#!/usr/bin/env python3
"""Writes the oomtrace wheel with the standard library only (no setuptools, no network): `make wheel`.

    tools/make_wheel.py --out build/ --package python/oomtrace \
        --bin build/oomtrace --bin build/oomtrace-read --bin build/liboomtrace.so \
        --data share/man/man1=docs/man/oomtrace.1 --data share/doc/oomtrace=docs/JSON.md

The wheel holds the Python package, and the launcher, the library and the reader under oomtrace/bin/, with
the dist-info files a wheel needs (PEP 427, PEP 376 RECORD, core metadata 2.1, entry_points.txt for the
`oomtrace` and `oomtrace-read` console scripts). The --data files go to the environment's prefix (the
wheel's .data/data/ directory): the manual pages to share/man/man1, where `man oomtrace` finds them beside
the environment's bin/ on PATH, and the documents the --help texts name to share/doc/oomtrace. The binaries are
built for this machine (the Makefile's wheel rule: zstd and libdw linked in, libunwind and liblzma copied
beside the library, which finds them by its RPATH $ORIGIN), so the tag is this platform's (linux_x86_64), not
manylinux: pip installs it on machines with this C library or a newer one.
"""
import argparse
import base64
import hashlib
import os
import platform
import re
import stat
import sys
import zipfile

NAME = "oomtrace"
SUMMARY = "Who held the GPU memory when it ran out: a CUDA allocation tracer and its reports"


def version_of(package_dir):
    with open(os.path.join(package_dir, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        sys.exit("make_wheel: no __version__ in the package's __init__.py")
    return m.group(1)


def platform_tag():
    machine = platform.machine()
    if sys.platform != "linux" or not machine:
        sys.exit(f"make_wheel: the tracer is Linux-only, this is {sys.platform} {machine}")
    return f"linux_{machine}"


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory for the .whl")
    ap.add_argument("--package", required=True, help="the Python package's directory (python/oomtrace)")
    ap.add_argument("--bin", action="append", default=[], help="a file for oomtrace/bin/ (repeatable)")
    ap.add_argument("--data", action="append", default=[], metavar="DEST=FILE",
                    help="FILE installed into the environment's DEST, e.g. share/man/man1 (repeatable)")
    a = ap.parse_args()

    version = version_of(a.package)
    tag = f"py3-none-{platform_tag()}"
    dist_info = f"{NAME}-{version}.dist-info"
    files = []  # (arcname, bytes, executable)
    for entry in sorted(os.listdir(a.package)):
        if entry.endswith(".py"):
            with open(os.path.join(a.package, entry), "rb") as f:
                files.append((f"{NAME}/{entry}", f.read(), False))
    for path in a.bin:
        with open(path, "rb") as f:
            files.append((f"{NAME}/bin/{os.path.basename(path)}", f.read(), True))
    for spec in a.data:
        dest, sep, path = spec.partition("=")
        if not sep or not dest or dest.startswith("/") or ".." in dest.split("/"):
            sys.exit(f"make_wheel: --data wants DEST=FILE with DEST relative to the prefix, got {spec!r}")
        with open(path, "rb") as f:
            files.append((f"{NAME}-{version}.data/data/{dest.strip('/')}/{os.path.basename(path)}", f.read(), False))

    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
        "License: MIT\n"
        "Requires-Python: >=3.8\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "\n"
        "Preload liboomtrace.so into a CUDA program (`oomtrace run -- python train.py`) to record every device\n"
        "allocation and free with native and Python stacks, and read the snapshot written at out-of-memory.\n"
        "`import oomtrace` gives mark() and dump(). Needs only the C library on the machine.\n"
    )
    wheel = f"Wheel-Version: 1.0\nGenerator: oomtrace tools/make_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
    entry_points = (f"[console_scripts]\n{NAME} = {NAME}.__main__:main\n"
                    f"{NAME}-read = {NAME}.__main__:read_main\n")
    files += [
        (f"{dist_info}/METADATA", metadata.encode(), False),
        (f"{dist_info}/WHEEL", wheel.encode(), False),
        (f"{dist_info}/entry_points.txt", entry_points.encode(), False),
    ]
    record = [record_line(n, d) for n, d, _ in files] + [f"{dist_info}/RECORD,,"]
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode(), False))

    os.makedirs(a.out, exist_ok=True)
    whl = os.path.join(a.out, f"{NAME}-{version}-{tag}.whl")
    tmp = whl + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data, executable in files:
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            mode = 0o755 if executable else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16  # pip keeps the executable bit from here
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, whl)
    print(whl)


if __name__ == "__main__":
    main()
