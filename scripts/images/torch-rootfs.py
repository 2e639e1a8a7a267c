#!/usr/bin/env python3
"""Lists the root filesystem of the PyTorch image: the files this machine's
dpkg installed for Debian's python3-torch and python3 and every package they
depend on (Depends and Pre-Depends, each alternative resolved to the
installed package, recursively), without documentation, plus what dpkg's
maintainer scripts made for them (the update-alternatives links, the
dynamic linker's cache) and an empty /tmp.

    torch-rootfs.py key     prints the packages and versions (the image's cache key input)
    torch-rootfs.py files   prints the paths, NUL-separated, relative to /, for
                            `tar --no-recursion --null -T -`

Nothing is downloaded: the files are the installed packages' own, so the
container runs the same torch, BLAS and Python bytes as the host.
"""

import os
import subprocess
import sys

ROOTS = ("python3-torch", "python3")
# Documentation and translations: not needed to run, a tenth of the size.
SKIP = ("usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/locale/", "usr/share/lintian/")
EXTRA = ("etc/ld.so.cache", "etc/ld.so.conf", "etc/ld.so.conf.d", "etc/passwd", "etc/group", "tmp")
ADMIN = "/var/lib/dpkg/alternatives"


def installed():
    fmt = "${db:Status-Abbrev}\x1f${Package}\x1f${Architecture}\x1f${Version}\x1f${Provides}\x1f${Depends}\x1f${Pre-Depends}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f=" + fmt], check=True, capture_output=True, text=True).stdout
    pkgs, provides = {}, {}
    for line in out.splitlines():
        status, name, arch, version, prov, dep, pre = line.split("\x1f")
        if not status.startswith("ii"):
            continue
        pkgs[name] = (arch, version, dep + "," + pre)
        for p in prov.split(","):
            p = p.strip().split(" ")[0]
            if p:
                provides.setdefault(p, []).append(name)
    return pkgs, provides


def closure():
    pkgs, provides = installed()
    missing = [r for r in ROOTS if r not in pkgs]
    if missing:
        sys.exit(f"torch-rootfs: {', '.join(missing)} not installed (make e2e-deps installs python3-torch)")

    def resolve(alternatives):
        for a in alternatives.split("|"):
            name = a.strip().split(" ")[0].split(":")[0]
            if name in pkgs:
                return name
            if name in provides:
                return sorted(provides[name])[0]
        return None

    seen, todo = set(), list(ROOTS)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for alts in filter(None, (x.strip() for x in pkgs[name][2].split(","))):
            dep = resolve(alts)
            if dep is None:
                sys.exit(f"torch-rootfs: {name} depends on {alts!r}, which is not installed")
            todo.append(dep)
    return {n: pkgs[n] for n in sorted(seen)}


def list_file(name, arch):
    for f in (f"/var/lib/dpkg/info/{name}:{arch}.list", f"/var/lib/dpkg/info/{name}.list"):
        if os.path.exists(f):
            return f
    sys.exit(f"torch-rootfs: no file list for {name}")


def canonical(path):
    """path with its directories resolved (usrmerge: /lib is /usr/lib), the
    last component kept as it is (a symlink stays a symlink)."""
    head, tail = os.path.split(path)
    return os.path.join(os.path.realpath(head), tail)


def alternatives_links():
    """The links update-alternatives made (and /etc/alternatives' own)."""
    links = []
    for name in sorted(os.listdir(ADMIN)) if os.path.isdir(ADMIN) else []:
        with open(os.path.join(ADMIN, name), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        # mode, master link, then (slave name, slave link) pairs up to "".
        links.append(lines[1])
        i = 2
        while i + 1 < len(lines) and lines[i]:
            links.append(lines[i + 1])
            i += 2
        links.append("/etc/alternatives/" + name)
    return links


def files():
    paths = set()
    for name, (arch, _, _) in closure().items():
        with open(list_file(name, arch), encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                p = line.rstrip("\n")
                if p and p != "/." and os.path.lexists(p):
                    paths.add(canonical(p))
    for p in alternatives_links():
        if p.startswith("/") and os.path.islink(p):
            paths.add(canonical(p))
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            paths.add(top)
    for p in EXTRA:
        if os.path.lexists("/" + p):
            paths.add("/" + p)
    paths = {p for p in paths if not p.lstrip("/").startswith(SKIP)}
    # Every parent directory, so that the layer records their modes.
    for p in list(paths):
        d = os.path.dirname(p)
        while d not in ("/", ""):
            paths.add(d)
            d = os.path.dirname(d)
    out = sys.stdout.buffer
    for p in sorted(paths):
        out.write(os.fsencode(p.lstrip("/")) + b"\0")


def key():
    for name, (arch, version, _) in closure().items():
        print(f"{name}:{arch} {version}")


if __name__ == "__main__":
    {"key": key, "files": files}.get(sys.argv[1] if len(sys.argv) > 1 else "", lambda: sys.exit(__doc__))()
