import Glibc
import Logging
import NIOCore
import TrackerLogic

/// Sends on the peer channel that failed: a firewall rule that rejects them (EPERM), a
/// route gone (ENETUNREACH), a link down. A failed send never closes a socket: NIO
/// closes a datagram channel on any write error but ECONNREFUSED and ENOMEM, and that
/// socket is also where replies leave, so one rejected keepalive left a master that
/// answered nobody again while it still said it served. The node writes its datagrams
/// itself (`sendDatagram`, `DatagramBatch`) and counts what fails here: in `/api/node`,
/// in metrics, in a log line at most every 10 s, and in the health verdict while the
/// last failure is recent (`failing`).
struct PeerSendFailures {
    private(set) var count = 0
    private(set) var last: (at: Instant, error: String)?
    let log: RateLimitedLog

    init(logger: Logger) { log = RateLimitedLog(logger: logger, every: .seconds(10)) }

    /// `what` failed with `code` (an errno).
    mutating func failed(_ what: String, code: CInt, now: Instant) {
        count += 1
        let error = String(cString: strerror(code))
        last = (now, "\(what): \(error)")
        log.warning("a send on the peer channel failed", key: "peer-send-\(what)-\(code)",
                    metadata: ["what": "\(what)", "error": "\(error)", "errno": "\(code)", "failures": "\(count)"], now: now)
    }

    /// The last failure, while it is more recent than `within`.
    func failing(now: Instant, within: Milliseconds) -> String? {
        guard let last, now - last.at <= within else { return nil }
        return last.error
    }
}

/// Sends one datagram on `fd` to `target`; 0, or the errno of a refusal (never traps:
/// a closed descriptor gives EBADF).
func sendDatagram(_ datagram: ByteBuffer, to target: SocketAddress, on fd: CInt) -> CInt {
    let sent = datagram.withUnsafeReadableBytes { bytes in
        target.withSockAddr { address, length in
            Glibc.sendto(fd, bytes.baseAddress, bytes.count, CInt(MSG_DONTWAIT), address, socklen_t(length))
        }
    }
    return sent < 0 ? errno : 0
}
