"""The kernel's view of a server's listening sockets (sock_diag netlink): backlogs and accept queues."""

from __future__ import annotations

import os
import socket
import struct

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_LISTEN = 10


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
    found = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(5)
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
            # struct inet_diag_req_v2: family, protocol, ext, pad, states bitmask, then a zeroed sockid.
            req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN) + bytes(48)
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
                    # struct inet_diag_msg: 4 bytes, sockid (source port first, big-endian; 48 bytes),
                    # expires, rqueue (= the accept queue), wqueue (= the backlog for a listening socket), uid, inode.
                    sport = struct.unpack_from("!H", data, offset + 20)[0]
                    if sport == port:
                        found.append(struct.unpack_from("=II", data, offset + 16 + 4 + 48 + 4))
                    offset += (length + 3) & ~3
    return found

