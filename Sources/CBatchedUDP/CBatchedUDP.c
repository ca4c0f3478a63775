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
