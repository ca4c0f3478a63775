#define _GNU_SOURCE
#include <sys/socket.h>
#include "CEventPoll.h"

int cevent_stream_socket(int family) {
    return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

int cevent_accept(int fd, struct sockaddr *address, unsigned int *length) {
    _Static_assert(sizeof(socklen_t) == sizeof(unsigned int), "socklen_t is an unsigned int");
    return accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
