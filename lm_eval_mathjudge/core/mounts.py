"""Which filesystem a folder is on, read from the kernel's mount table, and whether it is shared by hosts.

SQLite keeps a database consistent with file locks, and its WAL mode with a shared-memory index
(the ``-shm`` file) that only works between processes of one host. On a filesystem mounted by
several hosts both fail: locks are missing or unreliable (NFS, SMB, FUSE) and each host maps its
own copy of the index, so writers on two hosts can corrupt the file. Such a filesystem is known
by its mount type. Linux only (``/proc``); elsewhere the type is unknown and nothing is assumed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MOUNT_TABLES = ("/proc/self/mountinfo", "/proc/mounts")  # the first one readable is used
MAX_TABLE_BYTES = 8 * 1024 * 1024  # a container host can list thousands of mounts; more is not a mount table

# Mount type -> what it is. Filesystems that several hosts mount at once, so SQLite's locks and its
# WAL index do not hold between writers on different hosts. Explicit: a type not listed is local.
NETWORK_FILESYSTEMS = {
    "nfs": "NFS", "nfs4": "NFS",
    "cifs": "SMB/CIFS", "smb3": "SMB", "smbfs": "SMB",
    "lustre": "Lustre", "gpfs": "IBM Storage Scale (GPFS)", "beegfs": "BeeGFS",
    "ceph": "CephFS", "fuse.ceph-fuse": "CephFS (FUSE)",
    "glusterfs": "GlusterFS", "fuse.glusterfs": "GlusterFS (FUSE)",
    "ocfs2": "OCFS2", "gfs2": "GFS2", "afs": "AFS", "9p": "9P",
    "orangefs": "OrangeFS", "pvfs2": "OrangeFS (PVFS2)", "panfs": "PanFS", "wekafs": "WekaFS",
    "quobyte": "Quobyte", "fuse.quobyte": "Quobyte (FUSE)",
    "fuse.sshfs": "SSHFS", "fuse.s3fs": "s3fs", "fuse.gcsfuse": "Cloud Storage FUSE", "fuse.rclone": "rclone",
    "fuse.juicefs": "JuiceFS", "fuse.mfs": "MooseFS", "fuse.lizardfs": "LizardFS", "fuse.davfs": "WebDAV",
}


@dataclass(frozen=True)
class Mount:
    point: str  # where it is mounted
    fstype: str  # e.g. "nfs4", "ext4", "fuse.sshfs"
    source: str  # e.g. "server:/export/home"


def read_table(path: str | None = None) -> list[Mount]:
    """The mounts listed in ``path`` (mountinfo or /proc/mounts format); [] when no table can be read."""
    for candidate in (path,) if path else MOUNT_TABLES:
        try:
            with open(candidate, encoding="utf-8", errors="replace") as fh:
                text = fh.read(MAX_TABLE_BYTES)
        except OSError:
            continue
        return [m for m in map(_parse_line, text.splitlines()) if m is not None]
    return []


def _parse_line(line: str) -> Mount | None:
    fields = line.split()
    if " - " in line:  # mountinfo: id parent dev root point options [optional...] - type source super-options
        head, _, tail = line.partition(" - ")
        head_fields, tail_fields = head.split(), tail.split()
        if len(head_fields) < 5 or len(tail_fields) < 2:
            return None
        return Mount(_unescape(head_fields[4]), tail_fields[0], _unescape(tail_fields[1]))
    if len(fields) >= 3:  # /proc/mounts (fstab format): source point type options dump pass
        return Mount(_unescape(fields[1]), fields[2], _unescape(fields[0]))
    return None


def _unescape(field: str) -> str:
    """The kernel writes space, tab, newline and backslash in paths as octal escapes (``\\040``)."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        chunk = field[i + 1:i + 4]
        if field[i] == "\\" and len(chunk) == 3 and all(c in "01234567" for c in chunk):
            out.append(chr(int(chunk, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_of(folder: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding ``folder`` (which need not exist yet: its nearest existing parent decides)."""
    path = os.path.abspath(folder)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    path = os.path.realpath(path)
    best = None
    for mount in mounts:  # the longest mount point that contains the path; a later one hides an earlier
        point = mount.point.rstrip("/") or "/"
        inside = path == point or path.startswith(point if point == "/" else point + "/")
        if inside and (best is None or len(point) >= len(best.point.rstrip("/") or "/")):
            best = mount
    return best


def network_filesystem(folder: str, table: str | None = None) -> Mount | None:
    """The mount of ``folder`` when it is a filesystem shared by hosts (``NETWORK_FILESYSTEMS``), else None."""
    mount = mount_of(folder, read_table(table))
    return mount if mount is not None and mount.fstype in NETWORK_FILESYSTEMS else None
