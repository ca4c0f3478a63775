// epoll(7), eventfd(2) and accept4(2) for the plain HTTP tracker's listener
// (`HTTPTrackerEpoll`). Glibc's Swift module does not bring <sys/epoll.h> or
// <sys/eventfd.h>, and declares accept4 only under _GNU_SOURCE, which this header must not
// define (see CBatchedUDP.h): the feature macro lives in CEventPoll.c alone.
#ifndef CEVENTPOLL_H
#define CEVENTPOLL_H

#include <sys/epoll.h>
#include <sys/eventfd.h>

// Not <sys/socket.h>: CBatchedUDP's module brings it, and a second module including it
// hides its constants from Swift.
struct sockaddr;

/// A non-blocking, close-on-exec TCP socket of `family`; -1 with errno.
int cevent_stream_socket(int family);

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC; -1 with errno.
int cevent_accept(int fd, struct sockaddr *address, unsigned int *length);

#endif
