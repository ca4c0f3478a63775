// recvmmsg(2) and sendmmsg(2) for Swift. Glibc declares them, and struct mmsghdr, only
// under _GNU_SOURCE, which this header must not define: every C module that includes
// <sys/socket.h> has to see the same declarations (clang refuses two definitions of
// fd_set), so the feature macro lives in CBatchedUDP.c alone and this header declares
// a struct of the same layout, checked there.
#ifndef CBATCHEDUDP_H
#define CBATCHEDUDP_H

#include <sys/socket.h>
#include <sys/uio.h>

/// One datagram of a batch (struct mmsghdr): where its bytes are, and (received) where it
/// came from or (sent) where it goes; `msg_len` is the bytes the kernel moved.
typedef struct {
    struct msghdr msg_hdr;
    unsigned int msg_len;
} cbatched_message;

/// recvmmsg with MSG_WAITFORONE: blocks for the first datagram only, then takes what is
/// already queued, up to `count`. Returns how many, or -1 with errno.
int cbatched_recvmmsg(int fd, cbatched_message *messages, unsigned int count);

/// sendmmsg: returns how many were sent, or -1 with errno.
int cbatched_sendmmsg(int fd, cbatched_message *messages, unsigned int count);

/// With `on`, attaches a socket filter that passes only datagrams starting with `magic`
/// (big-endian) and `version`, the cluster's frames; the kernel drops every other datagram
/// before it is queued. Without, detaches it (none attached is fine). 0, or -1 with errno.
int cbatched_pass_only_frames(int fd, int on, unsigned short magic, unsigned char version);

#endif
