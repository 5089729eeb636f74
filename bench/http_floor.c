/* The cheapest HTTP/1.1 keep-alive closed loop this bench knows how to write: what netarena-load's I/O
 * alone costs per request on this machine (a generator doing the same I/O spends no less, but for the
 * machine's noise), measured beside wrk and netarena-load by loadgen_vs_wrk.py --floor.
 *
 * It does only what every closed-loop client must do and nothing a real one also does: each connection
 * sends one fixed GET, waits for the answer and sends again. No parsing (every answer of the target is
 * assumed to have the length of the first one, learned before the loop), no latency histogram, no
 * status check, no timeouts. The I/O is netarena-load's fast path without its work: one io_uring
 * (SINGLE_ISSUER | DEFER_TASKRUN), registered sockets, one multishot receive per connection into a
 * ring of provided buffers, sends as SQEs that complete only on failure (MSG_WAITALL, so a short send
 * is finished by the kernel, and IOSQE_CQE_SKIP_SUCCESS), one io_uring_enter per turn waiting for half
 * the connections' answers or 50 µs, whichever comes first (netarena-load's coalescing window at its
 * cap; waiting for one completion instead measured the same here).
 * If the target's answers did change length, a connection would stall rather than miscount, and the
 * bench compares the count printed here with the server's own.
 *
 * Usage: http_floor PORT PATH CONNECTIONS SECONDS  (target 127.0.0.1:PORT)
 * Prints one JSON line: {"responses": N, "seconds": S, "response_bytes": B}. Exit 2 on bad arguments,
 * 1 on any other error (named on stderr).
 * Needs liburing (apt-get install liburing-dev) and Linux 6.1+. */
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { BUFFERS = 256, BUFFER_BYTES = 16384, GROUP = 1 };
enum { RECV = 1, SEND = 2 }; /* user_data's high half; the low half is the connection */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what, int err) {
    fprintf(stderr, "http_floor: %s: %s\n", what, strerror(err));
    exit(1);
}

/* Sends the request on a blocking socket and reads one whole answer; returns its length. */
static long learn_response_length(int fd, const char *req, size_t req_len) {
    char buf[65536];
    size_t have = 0;
    if (write(fd, req, req_len) != (ssize_t)req_len) die("first request", errno);
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0) die("first response", n < 0 ? errno : ECONNRESET);
        have += n;
        buf[have] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (!end) continue;
        long head = end + 4 - buf, body = -1;
        for (char *line = strstr(buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n"))
            if (strncasecmp(line + 2, "content-length:", 15) == 0) body = atol(line + 17);
        if (body < 0) {
            fprintf(stderr, "http_floor: the first response has no Content-Length\n");
            exit(1);
        }
        if ((long)have >= head + body) return head + body;
    }
}

/* The ring has room for a receive and a send per connection, at most what one turn queues. */
static struct io_uring_sqe *next_sqe(struct io_uring *ring) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe) die("submission queue full", EOVERFLOW);
    return sqe;
}

static void queue_recv(struct io_uring *ring, int conn) {
    struct io_uring_sqe *sqe = next_sqe(ring);
    io_uring_prep_recv_multishot(sqe, conn, NULL, 0, 0);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
    sqe->buf_group = GROUP;
    io_uring_sqe_set_data64(sqe, ((unsigned long long)RECV << 32) | conn);
}

static void queue_send(struct io_uring *ring, int conn, const char *req, size_t req_len) {
    struct io_uring_sqe *sqe = next_sqe(ring);
    io_uring_prep_send(sqe, conn, req, req_len, MSG_WAITALL);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, ((unsigned long long)SEND << 32) | conn);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: http_floor PORT PATH CONNECTIONS SECONDS\n");
        return 2;
    }
    int port = atoi(argv[1]), conns = atoi(argv[3]);
    double seconds = atof(argv[4]);
    if (port <= 0 || port > 65535 || conns <= 0 || conns > 4096 || seconds <= 0) {
        fprintf(stderr, "http_floor: PORT 1..65535, CONNECTIONS 1..4096 and SECONDS > 0\n");
        return 2;
    }
    char req[512];
    int req_len = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", argv[2], port);
    if (req_len <= 0 || req_len >= (int)sizeof req) {
        fprintf(stderr, "http_floor: PATH too long\n");
        return 2;
    }

    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    int *fds = calloc(conns, sizeof *fds);
    long *pending = calloc(conns, sizeof *pending); /* bytes of an unfinished answer */
    for (int i = 0; i < conns; i++) {
        int one = 1;
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (fds[i] < 0) die("socket", errno);
        setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fds[i], (struct sockaddr *)&addr, sizeof addr)) die("connect", errno);
    }
    long response_len = learn_response_length(fds[0], req, req_len);

    struct io_uring ring;
    struct io_uring_params params = {
        .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL |
                 IORING_SETUP_CQSIZE,
        .cq_entries = 4 * (unsigned)conns + 64,
    };
    int err = io_uring_queue_init_params(2 * conns + 8, &ring, &params);
    if (err) die("io_uring setup", -err);
    if ((err = io_uring_register_files(&ring, fds, conns))) die("registering sockets", -err);

    /* liburing 2.3 (Debian 12) has no io_uring_setup_buf_ring: register the ring by hand. */
    struct io_uring_buf_ring *bufring = aligned_alloc(4096, BUFFERS * sizeof(struct io_uring_buf));
    char *buffers = aligned_alloc(4096, (size_t)BUFFERS * BUFFER_BYTES);
    if (!bufring || !buffers) die("allocating buffers", ENOMEM);
    memset(bufring, 0, BUFFERS * sizeof(struct io_uring_buf));
    io_uring_buf_ring_init(bufring);
    struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)bufring, .ring_entries = BUFFERS, .bgid = GROUP};
    if ((err = io_uring_register_buf_ring(&ring, &reg, 0))) die("registering the buffer ring", -err);
    for (int b = 0; b < BUFFERS; b++)
        io_uring_buf_ring_add(bufring, buffers + (size_t)b * BUFFER_BYTES, BUFFER_BYTES, b,
                              io_uring_buf_ring_mask(BUFFERS), b);
    io_uring_buf_ring_advance(bufring, BUFFERS);

    for (int i = 0; i < conns; i++) {
        queue_recv(&ring, i);
        queue_send(&ring, i, req, req_len);
    }
    long responses = 0;
    double started = now_s(), end = started + seconds;
    struct __kernel_timespec window = {.tv_sec = 0, .tv_nsec = 50 * 1000};
    unsigned batch = conns / 2 ? conns / 2 : 1;
    for (;;) {
        struct io_uring_cqe *first;
        err = io_uring_submit_and_wait_timeout(&ring, &first, batch, &window, NULL);
        if (err < 0 && err != -ETIME && err != -EINTR) die("io_uring_enter", -err);
        if (now_s() >= end) break;
        unsigned head, seen = 0;
        struct io_uring_cqe *cqe;
        (void)first;
        io_uring_for_each_cqe(&ring, head, cqe) {
            seen++;
            int conn = (int)(cqe->user_data & 0xffffffff), kind = (int)(cqe->user_data >> 32);
            if (kind == SEND) /* only a failed send completes */
                die("send", cqe->res < 0 ? -cqe->res : EIO);
            if (cqe->res == -ENOBUFS) { /* every buffer was taken: receive again once some are back */
                queue_recv(&ring, conn);
                continue;
            }
            if (cqe->res < 0) die("recv", -cqe->res);
            if (cqe->res == 0) die("recv", ECONNRESET);
            int bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
            io_uring_buf_ring_add(bufring, buffers + (size_t)bid * BUFFER_BYTES, BUFFER_BYTES, bid,
                                  io_uring_buf_ring_mask(BUFFERS), 0);
            io_uring_buf_ring_advance(bufring, 1);
            if (!(cqe->flags & IORING_CQE_F_MORE)) queue_recv(&ring, conn);
            pending[conn] += cqe->res;
            responses += pending[conn] / response_len;
            pending[conn] %= response_len;
            if (pending[conn] == 0) queue_send(&ring, conn, req, req_len);
        }
        io_uring_cq_advance(&ring, seen);
    }
    printf("{\"responses\": %ld, \"seconds\": %.3f, \"response_bytes\": %ld}\n", responses, now_s() - started,
           response_len);
    return 0;
}
