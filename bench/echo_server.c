/*
 * A minimal native TCP echo server for bench/echo_throughput.py: one thread, level-triggered epoll,
 * non-blocking sockets. It exists so the echo benchmark measures the generator against a server that
 * costs as little as possible per byte; it is not a contestant.
 *
 * Usage: echo_server PORT      (PORT 0 picks a free port)
 * Prints "PORT <n>" on stdout once listening on 127.0.0.1, then serves until killed.
 *
 * Each connection owns one buffer. While echoed bytes are waiting for the socket to drain, the
 * connection stops reading (EPOLLOUT instead of EPOLLIN): that is the backpressure an echo server
 * must apply, otherwise a fast sender could make it buffer without bound.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUFFER_BYTES (64 * 1024)
#define MAX_EVENTS 256
#define LISTEN_BACKLOG 4096

struct conn {
    int fd;
    size_t len; /* bytes in buf */
    size_t off; /* bytes of buf already written back */
    char buf[BUFFER_BYTES];
};

static int epfd;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void watch(struct conn *c, uint32_t events, int op) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(epfd, op, c->fd, &ev) < 0) die("epoll_ctl");
}

static void drop(struct conn *c) {
    close(c->fd); /* also removes it from the epoll set */
    free(c);
}

/* Writes what is pending; returns 0 when all is written, 1 when the socket is full, -1 on error. */
static int flush_pending(struct conn *c) {
    while (c->off < c->len) {
        ssize_t w = send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
            if (errno == EINTR) continue;
            return -1;
        }
        c->off += (size_t)w;
    }
    c->len = c->off = 0;
    return 0;
}

static void on_readable(struct conn *c) {
    ssize_t n = recv(c->fd, c->buf, sizeof c->buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop(c);
        return;
    }
    if (n < 0) return;
    c->len = (size_t)n;
    c->off = 0;
    int r = flush_pending(c);
    if (r < 0) drop(c);
    else if (r > 0) watch(c, EPOLLOUT, EPOLL_CTL_MOD);
}

static void on_writable(struct conn *c) {
    int r = flush_pending(c);
    if (r < 0) drop(c);
    else if (r == 0) watch(c, EPOLLIN, EPOLL_CTL_MOD);
}

static void accept_all(int lfd) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR || errno == ECONNABORTED) continue;
            /* EMFILE and friends: leave the rest in the backlog and try again on the next event. */
            perror("accept4");
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = malloc(sizeof *c);
        if (!c) die("malloc");
        c->fd = fd;
        c->len = c->off = 0;
        watch(c, EPOLLIN, EPOLL_CTL_ADD);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT   (0 picks a free port)\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0) die("socket");
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
    if (listen(lfd, LISTEN_BACKLOG) < 0) die("listen");
    socklen_t alen = sizeof addr;
    if (getsockname(lfd, (struct sockaddr *)&addr, &alen) < 0) die("getsockname");

    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) die("epoll_create1");
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &lev) < 0) die("epoll_ctl listen");

    printf("PORT %u\n", ntohs(addr.sin_port));
    fflush(stdout);

    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(epfd, events, MAX_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c == NULL) {
                accept_all(lfd);
            } else if (events[i].events & EPOLLOUT) {
                on_writable(c);
            } else if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                on_readable(c);
            }
        }
    }
}
