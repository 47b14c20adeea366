/* SSE reader for bench/sse.py: holds N streams on one epoll loop and stamps, per stream, the
 * wall time at which each event's frame (the "\n\n" after its `bench#<n>#` marker) was read.
 * Same stdin protocol as the Python reader: prints one JSON line when every stream has its
 * response status, then `mark` starts the CPU window and `stop` writes the results:
 *   OUT.meta  one line per stream: status connected_at closed_at duplicates
 *   OUT.recv  count * max_seq doubles (0 = not received), stream-major
 *   OUT.cpu   cpu_seconds wall_seconds
 * Built by bench/sse.py with `cc -O2`; it parses nothing but the marker, so 1,000 streams at
 * 50 events/s cost a few percent of a core (the Python reader spends most of one on nchan). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CONNECTING, HEADERS, STREAMING, CLOSED };

typedef struct {
    int fd, state, status, match, in_num, npending, prev_nl;
    long num;
    int pending[64];
    double connected_at, closed_at;
    long dups;
    char head[4096];
    int headlen;
} Conn;

static const char MARK[] = "bench#";
static int count, max_seq, port, ramp;
static const char *path, *key, *out;
static Conn *conns;
static double *recv_at;
static char request[8192];
static int reqlen;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void feed(int i, const char *p, long n, double t) {
    Conn *c = &conns[i];
    double *mine = recv_at + (long)i * max_seq;
    for (long k = 0; k < n; k++) {
        char ch = p[k];
        if (c->in_num) {
            if (ch >= '0' && ch <= '9') {
                c->num = c->num * 10 + (ch - '0');
                continue;
            }
            if (ch == '#' && c->npending < 64) c->pending[c->npending++] = (int)c->num;
            c->in_num = 0;
            c->match = 0;
        }
        if (ch == MARK[c->match]) {
            if (++c->match == 6) {
                c->in_num = 1;
                c->num = 0;
            }
        } else {
            c->match = (ch == MARK[0]) ? 1 : 0;
        }
        if (ch == '\n') {
            if (c->prev_nl) {
                for (int j = 0; j < c->npending; j++) {
                    int seq = c->pending[j];
                    if (seq < 0 || seq >= max_seq) continue;
                    if (mine[seq] != 0) c->dups++;
                    else mine[seq] = t;
                }
                c->npending = 0;
            }
            c->prev_nl = 1;
        } else if (ch != '\r') {
            c->prev_nl = 0;
        }
    }
}

static int open_conn(int ep, int i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    conns[i].fd = fd;
    conns[i].state = CONNECTING;
    struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN, .data.u32 = (unsigned)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

static void close_conn(int ep, int i, int status_if_none) {
    Conn *c = &conns[i];
    if (c->state == CLOSED) return;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (!c->status) c->status = status_if_none;
    if (c->state == STREAMING) c->closed_at = now();
    c->state = CLOSED;
}

static void write_results(double cpu_mark, double wall_mark) {
    char name[4096];
    snprintf(name, sizeof name, "%s.meta", out);
    FILE *f = fopen(name, "w");
    for (int i = 0; i < count; i++)
        fprintf(f, "%d %.6f %.6f %ld\n", conns[i].status, conns[i].connected_at, conns[i].closed_at, conns[i].dups);
    fclose(f);
    snprintf(name, sizeof name, "%s.recv", out);
    f = fopen(name, "wb");
    fwrite(recv_at, sizeof(double), (size_t)count * max_seq, f);
    fclose(f);
    snprintf(name, sizeof name, "%s.cpu", out);
    f = fopen(name, "w");
    fprintf(f, "%.4f %.4f\n", cpu() - cpu_mark, mono() - wall_mark);
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: sse_reader PORT PATH KEY COUNT MAX_SEQ OUT RAMP\n");
        return 2;
    }
    port = atoi(argv[1]), path = argv[2], key = argv[3], count = atoi(argv[4]), max_seq = atoi(argv[5]);
    out = argv[6], ramp = atoi(argv[7]);
    reqlen = snprintf(request, sizeof request,
                      "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n%s%s%s\r\n", path, port,
                      key[0] ? "Authorization: Bearer " : "", key, key[0] ? "\r\n" : "");
    conns = calloc(count, sizeof(Conn));
    recv_at = calloc((size_t)count * max_seq, sizeof(double));
    int ep = epoll_create1(0);
    struct epoll_event sev = {.events = EPOLLIN, .data.u32 = 0xffffffffu};
    epoll_ctl(ep, EPOLL_CTL_ADD, 0, &sev);
    int next = 0, pending = 0, answered = 0, ready_printed = 0;
    double t0 = mono(), cpu_mark = cpu(), wall_mark = mono();
    static char buf[1 << 16];
    static char line[256];
    int linelen = 0;
    struct epoll_event evs[256];
    for (;;) {
        while (next < count && pending < ramp) {
            if (open_conn(ep, next) < 0) {
                conns[next].state = CLOSED;
                conns[next].status = -1;
                answered++;
            } else {
                pending++;
            }
            next++;
        }
        if (!ready_printed && answered == count) {
            int ok = 0, statuses[8], ns = 0;
            for (int i = 0; i < count; i++) {
                if (conns[i].status == 200) ok++;
                int seen = 0;
                for (int j = 0; j < ns; j++) seen |= statuses[j] == conns[i].status;
                if (!seen && ns < 8) statuses[ns++] = conns[i].status;
            }
            printf("{\"ready\": %d, \"of\": %d, \"seconds\": %.2f, \"statuses\": [", ok, count, mono() - t0);
            for (int j = 0; j < ns; j++) printf("%s%d", j ? ", " : "", statuses[j]);
            printf("]}\n");
            fflush(stdout);
            ready_printed = 1;
        }
        int n = epoll_wait(ep, evs, 256, ready_printed ? -1 : 120000);
        if (n == 0 && !ready_printed) {  /* 120 s without progress: give up on the rest */
            for (int i = 0; i < count; i++)
                if (conns[i].state == CONNECTING || conns[i].state == HEADERS) close_conn(ep, i, -1), answered++;
            continue;
        }
        double t = now();
        for (int e = 0; e < n; e++) {
            unsigned i = evs[e].data.u32;
            if (i == 0xffffffffu) {
                long r = read(0, line + linelen, sizeof line - 1 - linelen);
                if (r <= 0) {
                    write_results(cpu_mark, wall_mark);
                    return 0;
                }
                linelen += r;
                line[linelen] = 0;
                char *nl;
                while ((nl = strchr(line, '\n'))) {
                    *nl = 0;
                    if (!strcmp(line, "mark")) cpu_mark = cpu(), wall_mark = mono();
                    if (!strncmp(line, "stop", 4)) {
                        write_results(cpu_mark, wall_mark);
                        return 0;
                    }
                    memmove(line, nl + 1, strlen(nl + 1) + 1);
                    linelen = strlen(line);
                }
                continue;
            }
            Conn *c = &conns[i];
            if (c->state == CONNECTING) {
                if (evs[e].events & (EPOLLERR | EPOLLHUP)) {
                    close_conn(ep, i, -1), pending--, answered++;
                    continue;
                }
                if (write(c->fd, request, reqlen) != reqlen) {
                    close_conn(ep, i, -1), pending--, answered++;
                    continue;
                }
                c->state = HEADERS;
                struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                continue;
            }
            for (;;) {
                long r = read(c->fd, buf, sizeof buf);
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
                if (r <= 0) {
                    if (c->state == HEADERS) pending--, answered++;
                    close_conn(ep, i, -1);
                    break;
                }
                if (c->state == HEADERS) {
                    long take = r < (long)sizeof c->head - c->headlen ? r : (long)sizeof c->head - c->headlen;
                    memcpy(c->head + c->headlen, buf, take);
                    c->headlen += take;
                    char *end = memmem(c->head, c->headlen, "\r\n\r\n", 4);
                    if (!end) continue;
                    c->status = atoi(c->head + 9);
                    c->connected_at = t;
                    pending--, answered++;
                    if (c->status != 200) {
                        close_conn(ep, i, c->status);
                        break;
                    }
                    c->state = STREAMING;
                    long body = (end + 4 - c->head) - (c->headlen - take);
                    feed(i, buf + body, r - body, t);
                } else {
                    feed(i, buf, r, t);
                }
            }
        }
    }
}
