"""The kernel's view of a server's sockets: its listening ones' backlogs and accept queues (sock_diag netlink), and
whether the socket at the other end of a connection of ours has TCP_NODELAY on."""

from __future__ import annotations

import ctypes
import os
import socket
import struct
from pathlib import Path

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_ESTABLISHED, _TCP_LISTEN = 1, 10
_SYS_PIDFD_GETFD = 438  # the same number on every architecture (Linux 5.6)
_libc = ctypes.CDLL(None, use_errno=True)


def listen_backlogs(port: int) -> list[int]:
    """The backlog of every listening TCP socket (IPv4 and IPv6) on `port`, as the kernel enforces it.

    Read from the kernel's sock_diag netlink interface (what `ss -ltn` shows as Send-Q for a listening
    socket: sk_max_ack_backlog, the server's listen() argument capped at net.core.somaxconn), so no tool
    needs to be installed. One entry per socket: SO_REUSEPORT workers each have their own.
    """
    return [backlog for _, backlog in _listening_queues(port)]


def accept_queue(port: int) -> tuple[int, int]:
    """(connections waiting to be accepted, how many may wait) on `port`, summed over its listening sockets
    (`ss -ltn`'s Recv-Q and Send-Q)."""
    queues = _listening_queues(port)
    return sum(waiting for waiting, _ in queues), sum(backlog for _, backlog in queues)


def _listening_queues(port: int) -> list[tuple[int, int]]:
    """(connections waiting to be accepted, backlog) of every listening TCP socket on `port`, from sock_diag."""
    return [(rqueue, wqueue) for sport, _, rqueue, wqueue, _ in _tcp_sockets(1 << _TCP_LISTEN) if sport == port]


def _tcp_sockets(states: int) -> list[tuple[int, int, int, int, int]]:
    """(source port, destination port, rqueue, wqueue, inode) of every TCP socket (IPv4 and IPv6) in `states` (a
    bitmask of 1 << TCP state), from the kernel's sock_diag netlink interface."""
    found = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(5)
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
            # struct inet_diag_req_v2: family, protocol, ext, pad, states bitmask, then a zeroed sockid.
            req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, states) + bytes(48)
            nl.send(struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP,
                                seq, 0) + req)
            done = False
            while not done:
                data = nl.recv(1 << 16)
                offset = 0
                while offset + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, offset)
                    if kind == _NLMSG_DONE or length < 16:
                        done = True
                        break
                    if kind == _NLMSG_ERROR:
                        errno_ = -struct.unpack_from("=i", data, offset + 16)[0]
                        raise OSError(errno_, f"sock_diag: {os.strerror(errno_)}")
                    # struct inet_diag_msg: 4 bytes, sockid (source and destination port first, big-endian; 48
                    # bytes), expires, rqueue (the accept queue of a listening socket), wqueue (its backlog), uid,
                    # inode.
                    sport, dport = struct.unpack_from("!HH", data, offset + 20)
                    rqueue, wqueue, _, inode = struct.unpack_from("=IIII", data, offset + 16 + 4 + 48 + 4)
                    found.append((sport, dport, rqueue, wqueue, inode))
                    offset += (length + 3) & ~3
    return found


def peer_tcp_nodelay(sock: socket.socket) -> tuple[bool | None, str]:
    """Whether the other end of our loopback connection `sock` (the server's accepted socket) has TCP_NODELAY on,
    and, when that cannot be told, why (None).

    The server's socket is found by its ports (sock_diag) and its inode among the processes' open files; a
    duplicate of it is taken with pidfd_getfd, which needs the right to ptrace that process (root, or its owner
    where Yama allows), and asked with getsockopt. Closing the duplicate leaves the server's connection open."""
    client_port = sock.getsockname()[1]
    server_port = sock.getpeername()[1]
    inodes = {inode for sport, dport, _, _, inode in _tcp_sockets(1 << _TCP_ESTABLISHED)
              if (sport, dport) == (server_port, client_port)}
    if len(inodes) != 1:
        return None, f"{len(inodes)} established sockets from port {server_port} to {client_port}"
    link = f"socket:[{inodes.pop()}]"
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            fds = list((pid_dir / "fd").iterdir())
        except OSError:  # gone, or not ours to read
            continue
        for fd_path in fds:
            try:
                if os.readlink(fd_path) != link:
                    continue
            except OSError:
                continue
            return _nodelay_of(int(pid_dir.name), int(fd_path.name))
    return None, "no process readable here holds the server's socket"


def _nodelay_of(pid: int, fd: int) -> tuple[bool | None, str]:
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as exc:
        return None, f"pidfd_open({pid}): {exc.strerror}"
    try:
        copy = _libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
        if copy < 0:
            return None, f"pidfd_getfd(process {pid}, fd {fd}): {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(pidfd)
    with socket.socket(fileno=copy) as server_socket:
        return bool(server_socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)), ""
