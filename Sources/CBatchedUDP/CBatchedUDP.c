#include "CBatchedUDP.h"

// MSG_WAITFORONE: block for the first datagram only, then take what is already queued.
int cbatched_recvmmsg(int fd, cbatched_message *messages, unsigned int count) {
    return recvmmsg(fd, messages, count, MSG_WAITFORONE, 0);
}

int cbatched_sendmmsg(int fd, cbatched_message *messages, unsigned int count) {
    return sendmmsg(fd, messages, count, 0);
}
