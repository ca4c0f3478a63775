// recvmmsg(2) and sendmmsg(2) for Swift: Glibc's module map compiles <sys/socket.h>
// without _GNU_SOURCE, which hides them and struct mmsghdr. This header defines it
// for its own module only.
#ifndef CBATCHEDUDP_H
#define CBATCHEDUDP_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>

/// One datagram of a batch: where its bytes are, and (received) where it came from or
/// (sent) where it goes.
typedef struct mmsghdr cbatched_message;

int cbatched_recvmmsg(int fd, cbatched_message *messages, unsigned int count);
int cbatched_sendmmsg(int fd, cbatched_message *messages, unsigned int count);

#endif
