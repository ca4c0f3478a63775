// A second BEP 15 load generator for the benchmark suite, independent of `tracker bench`
// (which is Swift): plain C, one thread, `sockets` connected UDP sockets read with
// recvmmsg, each keeping `inflight` announces outstanding. The suite compares trackers
// under both, so that no result depends on one generator's own costs.
//
// Usage: udpgen HOST PORT SOCKETS INFLIGHT SECONDS HASH_FILE
// HASH_FILE: info hashes, 40 hex digits per line (`tracker bench --print-info-hashes`).
// Each announce names a random hash and one of 20 peers of it (peer id from both), so
// the swarms are those of `tracker bench`. Prints one JSON line.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { MAX_SOCKETS = 64, MAX_HASHES = 100000, BATCH = 64, PEERS_PER_HASH = 20 };

static uint8_t hashes[MAX_HASHES][20];
static int hash_count;
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t next_random(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return rng_state;
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void put64(uint8_t *p, uint64_t v) { for (int i = 7; i >= 0; i--) { p[i] = v & 0xff; v >>= 8; } }
static void put32(uint8_t *p, uint32_t v) { for (int i = 3; i >= 0; i--) { p[i] = v & 0xff; v >>= 8; } }
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hashes(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    while (hash_count < MAX_HASHES && fgets(line, sizeof line, f)) {
        int ok = strlen(line) >= 40;
        for (int i = 0; ok && i < 20; i++) {
            int hi = hex_digit(line[2 * i]), lo = hex_digit(line[2 * i + 1]);
            if (hi < 0 || lo < 0) ok = 0; else hashes[hash_count][i] = (uint8_t)(hi << 4 | lo);
        }
        if (ok) hash_count++;
    }
    fclose(f);
    return hash_count > 0 ? 0 : -1;
}

/// BEP 15 connect: the connection id, or 0 when no reply came within a few tries.
static uint64_t connect_socket(int fd) {
    uint8_t request[16], reply[64];
    put64(request, 0x41727101980ULL); put32(request + 8, 0); put32(request + 12, 0xC0FFEE);
    for (int attempt = 0; attempt < 10; attempt++) {
        send(fd, request, sizeof request, 0);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 500) <= 0) continue;
        ssize_t n = recv(fd, reply, sizeof reply, 0);
        if (n == 16 && get32(reply) == 0 && get32(reply + 4) == 0xC0FFEE) {
            uint64_t id = 0;
            for (int i = 8; i < 16; i++) id = id << 8 | reply[i];
            return id;
        }
    }
    return 0;
}

static void send_announce(int fd, uint64_t connection_id) {
    uint8_t q[98] = { 0 };
    int hash = (int)(next_random() % (uint64_t)hash_count);
    uint32_t peer = (uint32_t)(next_random() % PEERS_PER_HASH);
    put64(q, connection_id); put32(q + 8, 1); put32(q + 12, (uint32_t)next_random());
    memcpy(q + 16, hashes[hash], 20);
    memcpy(q + 36, "-UG0001-", 8); put32(q + 44, (uint32_t)hash); put32(q + 48, peer); // peer id
    put64(q + 64, next_random() % 2 ? 0 : 1000);  // left: seeders and leechers
    put32(q + 92, 50);                            // num_want
    q[96] = 0x1A; q[97] = 0xE1;                   // port 6881
    send(fd, q, sizeof q, 0);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: udpgen HOST PORT SOCKETS INFLIGHT SECONDS HASH_FILE\n");
        return 2;
    }
    int sockets = atoi(argv[3]), inflight = atoi(argv[4]);
    double duration = atof(argv[5]);
    struct sockaddr_in target = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
    if (sockets < 1 || sockets > MAX_SOCKETS || inflight < 1 || inflight > 4096 || duration <= 0
        || inet_pton(AF_INET, argv[1], &target.sin_addr) != 1 || read_hashes(argv[6]) != 0) {
        fprintf(stderr, "udpgen: bad arguments or hash file\n");
        return 2;
    }
    int fds[MAX_SOCKETS], poller = epoll_create1(0);
    uint64_t ids[MAX_SOCKETS];
    long answered[MAX_SOCKETS] = { 0 }, seen[MAX_SOCKETS] = { 0 };
    for (int s = 0; s < sockets; s++) {
        fds[s] = socket(AF_INET, SOCK_DGRAM, 0);
        if (fds[s] < 0 || connect(fds[s], (struct sockaddr *)&target, sizeof target) != 0 || (ids[s] = connect_socket(fds[s])) == 0) {
            fprintf(stderr, "udpgen: no connect reply from %s:%s\n", argv[1], argv[2]);
            return 1;
        }
        struct epoll_event e = { .events = EPOLLIN, .data.u32 = (uint32_t)s };
        epoll_ctl(poller, EPOLL_CTL_ADD, fds[s], &e);
    }
    static uint8_t buffers[BATCH][2048];
    struct mmsghdr messages[BATCH];
    struct iovec vectors[BATCH];
    long announces = 0, errors = 0, invalid = 0;
    double start = seconds_now(), end = start + duration, checked = start;
    for (int s = 0; s < sockets; s++)
        for (int i = 0; i < inflight; i++) send_announce(fds[s], ids[s]);
    while (seconds_now() < end) {
        struct epoll_event ready[MAX_SOCKETS];
        int n = epoll_wait(poller, ready, MAX_SOCKETS, 50);
        for (int r = 0; r < n; r++) {
            int s = (int)ready[r].data.u32;
            for (int i = 0; i < BATCH; i++) {
                vectors[i] = (struct iovec){ .iov_base = buffers[i], .iov_len = sizeof buffers[i] };
                memset(&messages[i], 0, sizeof messages[i]);
                messages[i].msg_hdr.msg_iov = &vectors[i];
                messages[i].msg_hdr.msg_iovlen = 1;
            }
            int got = recvmmsg(fds[s], messages, BATCH, MSG_DONTWAIT, NULL);
            for (int i = 0; i < got; i++) {
                uint32_t action = messages[i].msg_len >= 8 ? get32(buffers[i]) : 99;
                if (action == 1 && messages[i].msg_len >= 20 && (messages[i].msg_len - 20) % 6 == 0) announces++;
                else if (action == 3) errors++;
                else invalid++;
                answered[s]++;
                send_announce(fds[s], ids[s]);
            }
        }
        // A request or reply lost on the way leaves one less in flight: a socket that got
        // nothing for a quarter second has lost them all, and gets its full count again.
        double now = seconds_now();
        if (now - checked >= 0.25) {
            for (int s = 0; s < sockets; s++) {
                if (answered[s] == seen[s])
                    for (int i = 0; i < inflight; i++) send_announce(fds[s], ids[s]);
                seen[s] = answered[s];
            }
            checked = now;
        }
    }
    double elapsed = seconds_now() - start;
    printf("{\"generator\":\"udpgen\",\"sockets\":%d,\"inflight\":%d,\"seconds\":%.2f,\"responses\":%ld,"
           "\"responses_per_second\":%.0f,\"error_replies\":%ld,\"invalid_replies\":%ld}\n",
           sockets, inflight, elapsed, announces, announces / elapsed, errors, invalid);
    return 0;
}
