/* SSE reader for bench/sse.py: holds N streams on one epoll loop and stamps, per stream, the
 * wall time at which each event's frame (the "\n\n" after its `bench#<n>#` marker) was read.
 * Same stdin protocol as the Python reader: prints one JSON line when every stream has its
 * response status, then `mark` starts the CPU window and `stop` writes the results:
 *   OUT.meta  one line per stream: status connected_at closed_at duplicates reconnected_at
 *             reconnect_status (the last two 0 without a storm)
 *   OUT.recv  count * max_seq doubles (0 = not received), stream-major
 *   OUT.cpu   cpu_seconds wall_seconds
 * The storm (`reconnect` on stdin, after bench/sse.py restarted the server): every stream that
 * was streaming reads what is left in its socket, then all reconnect at once (no ramp) with
 * `Last-Event-ID: <the last id: it read>`; one JSON line when all have answered. A stream's
 * window then runs from its first connect to the end, so an event lost or repeated across the
 * restart counts as missed or duplicated.
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
    double connected_at, closed_at, reconnected_at;
    long dups;
    char head[4096];
    int headlen;
    /* the SSE `id:` field: `idline` matches "id: " at a line start, then the value is read */
    int idmatch, inid, idlen, reconnecting, restatus;
    char lastid[72], curid[72];
} Conn;

static const char MARK[] = "bench#";
static int count, max_seq, port, ramp;
static const char *path, *key, *out;
static Conn *conns;
static double *recv_at;
static char request[8192];
static int reqlen;
static const char IDF[] = "id: ";

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
        if (c->inid) {
            if (ch == '\n') {
                c->curid[c->idlen] = 0;
                memcpy(c->lastid, c->curid, c->idlen + 1);
                c->inid = 0;
            } else if (ch != '\r' && c->idlen < 70) {
                c->curid[c->idlen++] = ch;
            }
        } else if (c->idmatch >= 0 && ch == IDF[c->idmatch]) {
            if (++c->idmatch == 4) c->inid = 1, c->idlen = 0, c->idmatch = -1;
        } else {
            c->idmatch = -1;
        }
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
            c->idmatch = 0; /* a line starts */
        } else if (ch != '\r') {
            c->prev_nl = 0;
        }
    }
}

static int open_conn(int ep, int i);

/* The storm: read what is left in every stream that was streaming (the server is gone, so the
 * rest of its bytes are in our socket buffer), then reconnect them all at once, each with its
 * Last-Event-ID. Returns how many were reopened. */
static void feed(int i, const char *p, long n, double t);
static void close_conn(int ep, int i, int status_if_none);

static int storm(int ep) {
    static char buf[1 << 16];
    int opened = 0;
    for (int i = 0; i < count; i++) {
        Conn *c = &conns[i];
        if (c->status != 200) continue;
        if (c->state == STREAMING) {
            for (;;) {
                long r = read(c->fd, buf, sizeof buf);
                if (r <= 0) break;
                feed(i, buf, r, now());
            }
            close_conn(ep, i, 200);
        }
        c->closed_at = 0; /* the stream's window runs on: what the restart loses counts as missed */
        c->reconnecting = 1;
        c->restatus = 0;
        c->headlen = 0;
        c->npending = 0, c->in_num = 0, c->match = 0, c->prev_nl = 0, c->inid = 0, c->idmatch = 0;
        if (open_conn(ep, i) < 0) {
            c->state = CLOSED;
            c->restatus = -1;
            continue;
        }
        opened++;
    }
    return opened;
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
    if (c->reconnecting) {
        if (!c->restatus) c->restatus = status_if_none;
    } else if (!c->status) {
        c->status = status_if_none;
    }
    if (c->state == STREAMING) c->closed_at = now();
    c->state = CLOSED;
}

static void write_results(double cpu_mark, double wall_mark) {
    char name[4096];
    snprintf(name, sizeof name, "%s.meta", out);
    FILE *f = fopen(name, "w");
    for (int i = 0; i < count; i++)
        fprintf(f, "%d %.6f %.6f %ld %.6f %d\n", conns[i].status, conns[i].connected_at, conns[i].closed_at,
                conns[i].dups, conns[i].reconnected_at, conns[i].restatus);
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
    int storming = 0, re_answered = 0, re_open = 0;
    double t0 = mono(), cpu_mark = cpu(), wall_mark = mono(), storm_t0 = 0, storm_wall = 0;
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
        if (storming && re_answered == re_open) {
            int ok = 0;
            for (int i = 0; i < count; i++) ok += conns[i].reconnecting && conns[i].restatus == 200;
            printf("{\"reconnected\": %d, \"of\": %d, \"seconds\": %.3f, \"started\": %.6f}\n", ok, re_open,
                   mono() - storm_t0, storm_wall);
            fflush(stdout);
            storming = 0;
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
                    if (!strcmp(line, "reconnect")) {
                        storm_t0 = mono(), storm_wall = now();
                        re_open = storm(ep);
                        re_answered = 0;
                        storming = 1;
                    }
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
/* An open answered (status known or failed): the storm's reconnects are counted apart. */
#define ANSWERED() (c->reconnecting ? (void)re_answered++ : (void)(pending--, answered++))
            if (c->state == CONNECTING) {
                if (evs[e].events & (EPOLLERR | EPOLLHUP)) {
                    close_conn(ep, i, -1), ANSWERED();
                    continue;
                }
                char req[8400];
                int len = reqlen;
                const char *send_req = request;
                if (c->reconnecting && c->lastid[0]) {
                    /* the request without its final CRLF, then the header, then the CRLF */
                    len = snprintf(req, sizeof req, "%.*sLast-Event-ID: %s\r\n\r\n", reqlen - 2, request, c->lastid);
                    send_req = req;
                }
                if (write(c->fd, send_req, len) != len) {
                    close_conn(ep, i, -1), ANSWERED();
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
                    if (c->state == HEADERS) ANSWERED();
                    close_conn(ep, i, -1);
                    break;
                }
                if (c->state == HEADERS) {
                    long take = r < (long)sizeof c->head - c->headlen ? r : (long)sizeof c->head - c->headlen;
                    memcpy(c->head + c->headlen, buf, take);
                    c->headlen += take;
                    char *end = memmem(c->head, c->headlen, "\r\n\r\n", 4);
                    if (!end) continue;
                    int status = atoi(c->head + 9);
                    ANSWERED();
                    if (c->reconnecting) {
                        c->restatus = status, c->reconnected_at = t;
                        c->closed_at = 0; /* one window from the first connect: gaps count as missed */
                    } else {
                        c->status = status, c->connected_at = t;
                    }
                    if (status != 200) {
                        close_conn(ep, i, status);
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
