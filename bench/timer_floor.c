/* The machine's own timer wake-up lag: the reference for netarena-load's open-loop schedule precision.
 *
 * Arms a CLOCK_MONOTONIC timerfd at absolute instants every PERIOD_NS and waits for it in epoll_wait,
 * the way netarena-load's open-loop threads sleep until their next intended send, and records how late
 * each wake-up came. Nothing else runs in the loop, so its lag is the floor a sleeping (not spinning)
 * generator can reach on this machine. Prints one JSON line: {"wakeups", "period_ns", "p50_us", ...}.
 *
 * Usage: timer_floor WAKEUPS PERIOD_NS
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3 || atol(argv[1]) < 1000 || atol(argv[2]) < 1000) {
        fprintf(stderr, "usage: timer_floor WAKEUPS(>=1000) PERIOD_NS(>=1000)\n");
        return 2;
    }
    long wakeups = atol(argv[1]);
    int64_t period_ns = atol(argv[2]);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
    int64_t *lag_ns = malloc(wakeups * sizeof *lag_ns);
    if (tfd < 0 || ep < 0 || !lag_ns || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) != 0) {
        perror("timer_floor: set-up");
        return 1;
    }
    int64_t first = now_ns() + 1000000;
    for (long i = 0; i < wakeups; i++) {
        int64_t at = first + i * period_ns;
        struct itimerspec its = {.it_value = {.tv_sec = at / 1000000000, .tv_nsec = at % 1000000000}};
        struct epoll_event out;
        if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0 || epoll_wait(ep, &out, 1, -1) != 1) {
            perror("timer_floor: wait");
            return 1;
        }
        lag_ns[i] = now_ns() - at;
    }
    qsort(lag_ns, wakeups, sizeof *lag_ns, by_value);
    printf("{\"wakeups\": %ld, \"period_ns\": %lld, \"p50_us\": %.1f, \"p99_us\": %.1f, \"p99_9_us\": %.1f, "
           "\"max_us\": %.1f}\n", wakeups, (long long)period_ns, lag_ns[wakeups / 2] / 1e3,
           lag_ns[wakeups * 99 / 100] / 1e3, lag_ns[wakeups * 999 / 1000] / 1e3, lag_ns[wakeups - 1] / 1e3);
    return 0;
}
