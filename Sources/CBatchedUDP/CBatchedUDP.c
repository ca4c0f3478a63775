#define _GNU_SOURCE
#include <stddef.h>
#include <sys/socket.h>
#include "CBatchedUDP.h"

_Static_assert(sizeof(cbatched_message) == sizeof(struct mmsghdr), "cbatched_message must be struct mmsghdr");
_Static_assert(offsetof(cbatched_message, msg_len) == offsetof(struct mmsghdr, msg_len), "msg_len must be where mmsghdr has it");

int cbatched_recvmmsg(int fd, cbatched_message *messages, unsigned int count) {
    return recvmmsg(fd, (struct mmsghdr *)messages, count, MSG_WAITFORONE, 0);
}

int cbatched_sendmmsg(int fd, cbatched_message *messages, unsigned int count) {
    return sendmmsg(fd, (struct mmsghdr *)messages, count, 0);
}

#include <errno.h>
#include <linux/filter.h>

int cbatched_pass_only_frames(int fd, int on, unsigned short magic, unsigned char version) {
    if (!on) {
        // Linux refuses any option value shorter than an int, even where none is read.
        int unused = 0;
        if (setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &unused, sizeof(unused)) == 0 || errno == ENOENT) return 0;
        // Should the detach fail, a filter that passes everything replaces this one.
        struct sock_filter pass[] = { BPF_STMT(BPF_RET | BPF_K, 0xFFFFFFFFu) };
        struct sock_fprog all = { .len = 1, .filter = pass };
        return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &all, sizeof(all));
    }
    // A UDP socket's filter sees the datagram from its UDP header: the payload is at 8.
    // A load past the end makes the filter drop the datagram (no frame is that short).
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 8),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, magic, 0, 3),
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 10),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, version, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0xFFFFFFFFu),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog program = { .len = sizeof(code) / sizeof(code[0]), .filter = code };
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof(program));
}
