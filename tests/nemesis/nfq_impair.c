/* A bad network for one namespace, applied by the kernel's netfilter queue: this kernel has
 * no sch_netem, so loss, delay, duplication and reordering are done here.
 *
 *   nfq_impair QUEUE LOSS_PERCENT DUP_PERCENT DELAY_MIN_MS DELAY_MAX_MS SEED
 *
 * The nft rules of tests/nemesis/nemesis.py send a namespace's packets to queue QUEUE
 * (with `bypass`: if this program is gone, packets pass). Each packet is dropped with
 * LOSS_PERCENT, else released after a delay drawn uniformly from the range, so packets
 * overtake one another (reordering). With DUP_PERCENT an IPv4 packet leaving the
 * namespace is also sent a second time, by a raw socket, after its own delay; the copy
 * carries mark 0x4e4d, which the rules let through. At most MAX_HELD packets wait at
 * once; beyond that a packet passes at once (the queue must never hold the host up).
 * SIGTERM or SIGINT releases what is held and exits. */
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <netinet/ip.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_HELD 4096
#define MAX_COPY 2048
#define COPY_MARK 0x4e4d

struct held {
    uint32_t id;          /* packet id for the verdict; 0 for a copy to send */
    uint64_t due_ms;
    uint16_t len;         /* copies only */
    unsigned char data[MAX_COPY];
};

static struct held *held;
static int held_count;
static struct nfq_q_handle *queue;
static int raw_fd = -1;
static volatile sig_atomic_t stopping;
static unsigned loss, dup_pct, delay_min, delay_max;
static uint64_t rng_state;
static unsigned long long dropped, delayed, duplicated, passed;

static uint64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* splitmix64: seeded, so a run's draws follow its seed. */
static uint64_t next_random(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static unsigned below(unsigned n) { return n == 0 ? 0 : (unsigned)(next_random() % n); }

static uint64_t draw_delay(void) {
    return delay_min + (delay_max > delay_min ? below(delay_max - delay_min + 1) : 0);
}

static void send_copy(const struct held *h) {
    if (raw_fd < 0 || h->len < sizeof(struct iphdr)) return;
    const struct iphdr *ip = (const struct iphdr *)h->data;
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = ip->daddr};
    if (sendto(raw_fd, h->data, h->len, 0, (struct sockaddr *)&to, sizeof to) >= 0) duplicated++;
}

static void release_due(uint64_t now, int all) {
    for (int i = 0; i < held_count;) {
        if (all || held[i].due_ms <= now) {
            if (held[i].id != 0) nfq_set_verdict(queue, held[i].id, NF_ACCEPT, 0, NULL);
            else if (!all) send_copy(&held[i]);
            held[i] = held[--held_count];
        } else {
            i++;
        }
    }
}

static int on_packet(struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
    (void)msg; (void)data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) return 0;
    uint32_t id = ntohl(ph->packet_id);
    if (below(100) < loss) {
        dropped++;
        return nfq_set_verdict(q, id, NF_DROP, 0, NULL);
    }
    unsigned char *payload = NULL;
    int len = nfq_get_payload(nfa, &payload);
    uint64_t now = now_ms();
    /* A copy only of what leaves this namespace: outgoing packets have no input device. */
    if (dup_pct && below(100) < dup_pct && held_count < MAX_HELD && nfq_get_indev(nfa) == 0 && len > 0 && len <= MAX_COPY
        && (payload[0] >> 4) == 4) {
        struct held *c = &held[held_count++];
        c->id = 0;
        c->due_ms = now + draw_delay();
        c->len = (uint16_t)len;
        memcpy(c->data, payload, (size_t)len);
    }
    uint64_t delay = draw_delay();
    if (delay == 0 || held_count >= MAX_HELD) {
        passed++;
        return nfq_set_verdict(q, id, NF_ACCEPT, 0, NULL);
    }
    held[held_count].id = id;
    held[held_count].due_ms = now + delay;
    held[held_count].len = 0;
    held_count++;
    delayed++;
    return 0;
}

static void on_signal(int sig) { (void)sig; stopping = 1; }

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s QUEUE LOSS_PERCENT DUP_PERCENT DELAY_MIN_MS DELAY_MAX_MS SEED\n", argv[0]);
        return 2;
    }
    unsigned queue_num = (unsigned)strtoul(argv[1], NULL, 10);
    loss = (unsigned)strtoul(argv[2], NULL, 10);
    dup_pct = (unsigned)strtoul(argv[3], NULL, 10);
    delay_min = (unsigned)strtoul(argv[4], NULL, 10);
    delay_max = (unsigned)strtoul(argv[5], NULL, 10);
    rng_state = strtoull(argv[6], NULL, 10);
    if (loss > 100 || dup_pct > 100 || delay_max < delay_min || delay_max > 10000) {
        fprintf(stderr, "nfq_impair: percentages 0..100, delays 0..10000 ms with MIN <= MAX\n");
        return 2;
    }
    held = calloc(MAX_HELD, sizeof *held);
    if (!held) return 1;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    struct nfq_handle *h = nfq_open();
    if (!h) { perror("nfq_open"); return 1; }
    queue = nfq_create_queue(h, (uint16_t)queue_num, &on_packet, NULL);
    if (!queue) { perror("nfq_create_queue"); return 1; }
    if (nfq_set_mode(queue, NFQNL_COPY_PACKET, MAX_COPY) < 0) { perror("nfq_set_mode"); return 1; }
    nfq_set_queue_maxlen(queue, MAX_HELD * 2);
    if (dup_pct) {
        raw_fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
        int mark = COPY_MARK;
        if (raw_fd < 0 || setsockopt(raw_fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) < 0) {
            perror("raw socket for copies");
            return 1;
        }
    }
    int fd = nfq_fd(h);
    char buf[65536];
    printf("READY queue %u\n", queue_num);
    fflush(stdout);
    while (!stopping) {
        uint64_t now = now_ms(), next = now + 100;
        for (int i = 0; i < held_count; i++) if (held[i].due_ms < next) next = held[i].due_ms;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, (int)(next > now ? next - now : 0));
        if (ready > 0) {
            ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0) nfq_handle_packet(h, buf, (int)n);
            else if (n < 0 && errno == ENOBUFS) fprintf(stderr, "nfq_impair: queue overrun; packets passed\n");
        }
        release_due(now_ms(), 0);
    }
    release_due(0, 1);
    fprintf(stderr, "nfq_impair: queue %u dropped %llu delayed %llu duplicated %llu passed %llu\n", queue_num, dropped, delayed,
            duplicated, passed);
    nfq_destroy_queue(queue);
    nfq_close(h);
    return 0;
}
