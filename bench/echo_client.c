/*
 * A minimal reference TCP echo flood client for bench/echo_throughput.py: the same workload and the
 * same system calls per chunk as `netarena-load echo` (epoll engine, one thread), minus what makes
 * netarena-load a measuring tool: it does not check the echoed bytes, time chunks or keep histograms.
 * It is therefore the floor of what moving these bytes costs one generator core; the benchmark
 * divides netarena-load's figures by this client's, measured in the same run on the same CPU.
 *
 * Usage: echo_client HOST:PORT [-c N] [--chunk C] (--bytes B [--limit S] | -d S)
 *   -c N        connections (default 1, as netarena-load echo)
 *   --chunk C   bytes per chunk (default 32768); the next chunk goes out when this one is echoed
 *   --bytes B   each connection sends B bytes, then closes; the run ends when all have finished.
 *               --limit S (default 600) is a hard limit on the run: past it the client gives up
 *   -d S        flood for S seconds (decimals allowed); bytes echoed after S are not counted
 * HOST is a numeric loopback address (127.x.x.x or ::1): this is a local benchmark tool, it refuses
 * anything else.
 * Prints one JSON line on stdout. Exit status 0 on success, 1 on a connection failure (reported on
 * stderr: a reference run with failures is no reference), 2 on bad arguments, 3 past --limit.
 *
 * What it does per connection, as netarena-load (crates/loadgen/src/io/epoll.rs, io/echo.rs) does:
 * non-blocking socket with TCP_NODELAY, registered once with edge-triggered epoll for
 * EPOLLIN | EPOLLOUT | EPOLLRDHUP (as mio registers READABLE | WRITABLE) and never modified;
 * a chunk is sent with send(MSG_NOSIGNAL) in slices of at most 64 KiB until done or EAGAIN (the
 * rest goes on the next writable edge); echoed bytes are read with recv() into a 64 KiB buffer,
 * stopping after a short read; when the chunk is fully echoed the next one is sent from inside the
 * read loop. Connections are opened at most 256 per loop turn with at most 1024 handshakes pending,
 * as netarena-load's ramp does. The payload is a constant buffer: what is sent does not change
 * what the kernel does, and nothing is checked.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Largest slice handed to one send() or recv(): netarena-load's SLICE_BYTES. */
#define SLICE_BYTES (64 * 1024)
/* netarena-load's EVENTS_CAPACITY, CONNECT_BATCH and MAX_RAMP_CONNECTING. */
#define MAX_EVENTS 1024
#define CONNECT_BATCH 256
#define MAX_RAMP_CONNECTING 1024

enum phase { NEW, CONNECTING, OPEN, DONE };

struct conn {
    int fd;
    enum phase phase;
    uint64_t sent;      /* bytes sent on this connection */
    uint64_t echoed;    /* bytes received back */
    uint64_t chunk_end; /* sent offset at which the current chunk ends */
};

static struct conn *conns;
static int nconns;
static uint64_t chunk_bytes = 32768;
static uint64_t bytes_per_conn; /* 0: duration mode */
static struct sockaddr_storage target;
static socklen_t target_len;
static char send_buf[SLICE_BYTES];
static char recv_buf[SLICE_BYTES];

static uint64_t bytes_counted; /* echoed bytes inside the measured time */
static int counting = 1;       /* cleared once the duration is over */
static int completed;          /* connections that echoed all their --bytes */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s HOST:PORT [-c N] [--chunk C] (--bytes B [--limit S] | -d S)\n"
            "  HOST must be 127.x.x.x or ::1 (numeric)\n",
            argv0);
    exit(2);
}

/* A connection failed: the run is void, say which and why. */
static void fail(int i, const char *what, int err) {
    fprintf(stderr, "echo_client: connection %d: %s%s%s (after %" PRIu64 " of %" PRIu64 " bytes echoed)\n",
            i, what, err ? ": " : "", err ? strerror(err) : "", conns[i].echoed, conns[i].sent);
    exit(1);
}

static uint64_t parse_count(const char *s, const char *opt) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0 || s[0] == '-') {
        fprintf(stderr, "echo_client: %s needs a whole number of at least 1, got '%s'\n", opt, s);
        exit(2);
    }
    return (uint64_t)v;
}

static double parse_seconds(const char *s, const char *opt) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || v > 86400) {
        fprintf(stderr, "echo_client: %s needs seconds > 0 (at most 86400), got '%s'\n", opt, s);
        exit(2);
    }
    return v;
}

/* HOST:PORT or [HOST]:PORT, numeric, loopback only. */
static void parse_target(const char *arg) {
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon = strrchr(arg, ':');
    if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof host) {
        fprintf(stderr, "echo_client: target must be HOST:PORT, got '%s'\n", arg);
        exit(2);
    }
    size_t hl = (size_t)(colon - arg);
    memcpy(host, arg, hl);
    host[hl] = 0;
    if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    uint64_t port = parse_count(colon + 1, "the port");
    if (port > 65535) {
        fprintf(stderr, "echo_client: port %" PRIu64 " is out of range\n", port);
        exit(2);
    }
    memset(&target, 0, sizeof target);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&target;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&target;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        if ((ntohl(v4->sin_addr.s_addr) >> 24) != 127) goto not_loopback;
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        target_len = sizeof *v4;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        if (!IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) goto not_loopback;
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        target_len = sizeof *v6;
    } else {
        fprintf(stderr, "echo_client: '%s' is not a numeric IPv4 or IPv6 address (use 127.0.0.1 or ::1)\n", host);
        exit(2);
    }
    return;
not_loopback:
    fprintf(stderr, "echo_client: refusing %s: only loopback targets (127.x.x.x, ::1) are allowed\n", host);
    exit(2);
}

static void open_conn(int epfd, int i) {
    struct conn *c = &conns[i];
    c->fd = socket(target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (c->fd < 0) fail(i, "socket", errno);
    int one = 1;
    if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) fail(i, "TCP_NODELAY", errno);
    if (connect(c->fd, (struct sockaddr *)&target, target_len) < 0 && errno != EINPROGRESS)
        fail(i, "connect", errno);
    /* Edge-triggered and registered once, as mio does: no epoll_ctl per chunk. */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.u32 = (uint32_t)i};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) fail(i, "epoll_ctl", errno);
    c->phase = CONNECTING;
}

/* Sends what is left of the current chunk until done or the socket is full. */
static void flush(int i) {
    struct conn *c = &conns[i];
    while (c->sent < c->chunk_end) {
        uint64_t want = c->chunk_end - c->sent;
        if (want > SLICE_BYTES) want = SLICE_BYTES;
        ssize_t w = send(c->fd, send_buf, (size_t)want, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return; /* the writable edge resumes it */
            if (errno == EINTR) continue;
            fail(i, "send", errno);
        }
        c->sent += (uint64_t)w;
    }
}

static void start_chunk(int i) {
    struct conn *c = &conns[i];
    uint64_t left = bytes_per_conn ? bytes_per_conn - c->sent : UINT64_MAX;
    c->chunk_end = c->sent + (chunk_bytes < left ? chunk_bytes : left);
    flush(i);
}

/* Returns 1 when the connection finished its --bytes (and is closed), else 0. */
static int on_readable(int i, int peer_closed) {
    struct conn *c = &conns[i];
    for (;;) {
        ssize_t n = recv(c->fd, recv_buf, sizeof recv_buf, 0);
        if (n == 0) fail(i, "closed by the server", 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            if (errno == EINTR) continue;
            fail(i, "recv", errno);
        }
        c->echoed += (uint64_t)n;
        if (counting) bytes_counted += (uint64_t)n;
        /* A counter comparison, not a content check: without it "fully echoed" means nothing. */
        if (c->echoed > c->sent) fail(i, "received more bytes than were sent", 0);
        if (c->echoed == c->chunk_end) {
            if (bytes_per_conn && c->echoed == bytes_per_conn) {
                close(c->fd); /* also removes it from the epoll set */
                c->phase = DONE;
                completed++;
                return 1;
            }
            start_chunk(i);
        }
        /* A short read drained the socket; only a reported FIN makes it worth reading on to EOF. */
        if ((size_t)n < sizeof recv_buf && !peer_closed) return 0;
    }
}

int main(int argc, char **argv) {
    double duration_s = 0, limit_s = 600;
    int have_limit = 0;
    uint64_t nc = 1;
    static const struct option opts[] = {
        {"connections", required_argument, NULL, 'c'},
        {"chunk", required_argument, NULL, 'C'},
        {"bytes", required_argument, NULL, 'b'},
        {"duration", required_argument, NULL, 'd'},
        {"limit", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "c:d:h", opts, NULL)) != -1) {
        switch (o) {
        case 'c': nc = parse_count(optarg, "-c"); break;
        case 'C': chunk_bytes = parse_count(optarg, "--chunk"); break;
        case 'b': bytes_per_conn = parse_count(optarg, "--bytes"); break;
        case 'd': duration_s = parse_seconds(optarg, "-d"); break;
        case 'l': limit_s = parse_seconds(optarg, "--limit"); have_limit = 1; break;
        default: usage(argv[0]);
        }
    }
    if (optind != argc - 1) usage(argv[0]);
    if (!bytes_per_conn == !(duration_s > 0)) {
        fprintf(stderr, "echo_client: give exactly one of --bytes B and -d S\n");
        exit(2);
    }
    if (have_limit && !bytes_per_conn) {
        fprintf(stderr, "echo_client: --limit goes with --bytes (-d already bounds the run)\n");
        exit(2);
    }
    if (nc > 1000000) {
        fprintf(stderr, "echo_client: -c %" PRIu64 " is more connections than this tool allows (1000000)\n", nc);
        exit(2);
    }
    parse_target(argv[optind]);
    nconns = (int)nc;

    /* As netarena-load: raise the soft fd limit to the hard one, refuse a run that cannot fit. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
        }
        if (rl.rlim_cur != RLIM_INFINITY && (uint64_t)nconns + 16 > (uint64_t)rl.rlim_cur) {
            fprintf(stderr, "echo_client: %d connections need more file descriptors than allowed (%llu)\n",
                    nconns, (unsigned long long)rl.rlim_cur);
            exit(2);
        }
    }
    signal(SIGPIPE, SIG_IGN);
    memset(send_buf, 'e', sizeof send_buf);
    conns = calloc((size_t)nconns, sizeof *conns);
    if (!conns) {
        perror("calloc");
        exit(1);
    }
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) {
        perror("epoll_create1");
        exit(1);
    }

    struct epoll_event events[MAX_EVENTS];
    const double t0 = now_s();
    const double end = t0 + (bytes_per_conn ? limit_s : duration_s);
    int next_new = 0, connecting = 0, live = nconns;
    double now = t0, done_at = t0;
    for (;;) {
        /* The ramp: a few hundred connects per turn, so early connections get served meanwhile. */
        int room = MAX_RAMP_CONNECTING - connecting;
        if (room > CONNECT_BATCH) room = CONNECT_BATCH;
        for (; room > 0 && next_new < nconns; room--, next_new++, connecting++) open_conn(epfd, next_new);
        if (live == 0) {
            done_at = now;
            break;
        }
        if (now >= end) {
            if (bytes_per_conn) {
                printf("{\"tool\": \"echo_client\", \"variant\": \"bytes\", \"error\": \"limit\", "
                       "\"connections_completed\": %d, \"bytes_echoed\": %" PRIu64 "}\n",
                       completed, bytes_counted);
                fprintf(stderr, "echo_client: --limit %.0f s reached with %d of %d connections complete\n",
                        limit_s, completed, nconns);
                exit(3);
            }
            break;
        }
        int timeout_ms = (next_new < nconns && connecting < MAX_RAMP_CONNECTING)
                             ? 0
                             : (int)((end - now) * 1000.0) + 1;
        int n = epoll_wait(epfd, events, MAX_EVENTS, timeout_ms);
        now = now_s();
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("epoll_wait");
            exit(1);
        }
        /* Bytes received after the duration are not counted (netarena-load stops counting too). */
        if (!bytes_per_conn && now >= end) counting = 0;
        for (int k = 0; k < n; k++) {
            int i = (int)events[k].data.u32;
            uint32_t e = events[k].events;
            struct conn *c = &conns[i];
            int peer_closed = (e & EPOLLHUP) || ((e & EPOLLIN) && (e & EPOLLRDHUP));
            if (c->phase == CONNECTING) {
                if ((e & (EPOLLERR | EPOLLHUP)) || peer_closed) {
                    int err = 0;
                    socklen_t len = sizeof err;
                    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                    fail(i, "connect", err ? err : ECONNRESET);
                }
                if (!(e & EPOLLOUT)) continue;
                c->phase = OPEN;
                connecting--;
                start_chunk(i);
                if ((e & EPOLLIN) && on_readable(i, peer_closed)) live--;
            } else if (c->phase == OPEN) {
                if (e & EPOLLOUT) flush(i);
                if ((e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && on_readable(i, peer_closed)) live--;
            }
        }
    }

    for (int i = 0; i < nconns; i++)
        if (conns[i].phase == OPEN || conns[i].phase == CONNECTING) close(conns[i].fd);
    double wall = now_s() - t0;
    if (bytes_per_conn) {
        printf("{\"tool\": \"echo_client\", \"variant\": \"bytes\", \"connections\": %d, \"chunk\": %" PRIu64
               ", \"bytes_per_connection\": %" PRIu64 ", \"connections_completed\": %d, \"bytes_echoed\": %" PRIu64
               ", \"completion_time_s\": %.6f, \"wall_s\": %.6f}\n",
               nconns, chunk_bytes, bytes_per_conn, completed, bytes_counted, done_at - t0, wall);
    } else {
        printf("{\"tool\": \"echo_client\", \"variant\": \"duration\", \"connections\": %d, \"chunk\": %" PRIu64
               ", \"duration_s\": %.6f, \"bytes_echoed\": %" PRIu64 ", \"wall_s\": %.6f}\n",
               nconns, chunk_bytes, duration_s, bytes_counted, wall);
    }
    return 0;
}
