#if canImport(Glibc)
import Glibc
#endif
import CBatchedUDP
import Foundation
import NIOCore

/// The sd_notify(3) protocol, without libsystemd: one datagram of `KEY=VALUE` lines to
/// the AF_UNIX socket `NOTIFY_SOCKET` names (a path, or `@name` in the abstract
/// namespace). Under `Type=notify` systemd waits for `READY=1` before it counts the unit
/// started, shows `STATUS=` in `systemctl status`, and restarts the unit when
/// `WatchdogSec=` passes without `WATCHDOG=1`.
///
/// Invariant: the watchdog is fed from the event loop that serves the node (`feed(on:)`),
/// never from a thread of its own, so a loop that stops turning stops the pings and
/// systemd restarts the node.
public final class SystemdNotifier: @unchecked Sendable {
    let fd: Int32
    let address: sockaddr_un
    let addressLength: socklen_t
    /// Half of `WATCHDOG_USEC`, when systemd asks this process for pings.
    public let watchdogInterval: TimeAmount?
    private var watchdog: RepeatedTask?
    private let lock = NSLock()

    /// From the environment systemd gives a `Type=notify` service; nil when there is no
    /// `NOTIFY_SOCKET` (not under systemd, or another `Type=`).
    public convenience init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let socket = environment["NOTIFY_SOCKET"] else { return nil }
        var interval: TimeAmount?
        // WATCHDOG_PID, when set, names the process the pings are for.
        if let usec = environment["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0,
           environment["WATCHDOG_PID"].flatMap(Int32.init).map({ $0 == getpid() }) ?? true {
            interval = .microseconds(usec / 2)
        }
        self.init(socket: socket, watchdogInterval: interval)
    }

    init?(socket path: String, watchdogInterval: TimeAmount?) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        // An abstract socket's name starts with a NUL byte where the path has '@'.
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity, bytes[0] == 0 || bytes[0] == UInt8(ascii: "/") else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.address = address
        addressLength = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        self.watchdogInterval = watchdogInterval
    }

    deinit { close(fd) }

    /// Sends `fields` (`READY=1`, `STATUS=…`) as one datagram; a failure is not the
    /// node's problem (systemd gone, or nobody listening).
    public func send(_ fields: [String]) {
        let message = Array(fields.joined(separator: "\n").utf8)
        var to = address
        _ = withUnsafePointer(to: &to) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, addressLength) }
            }
        }
    }

    public func ready(status: String) { send(["READY=1", "STATUS=\(Self.oneLine(status))"]) }
    public func status(_ status: String) { send(["STATUS=\(Self.oneLine(status))"]) }
    public func stopping() {
        lock.withLock { watchdog?.cancel(); watchdog = nil }
        send(["STOPPING=1", "STATUS=stopping"])
    }

    /// Pings the watchdog every `watchdogInterval` from `loop`, the node's own.
    public func feed(on loop: EventLoop) {
        guard let interval = watchdogInterval else { return }
        let task = loop.scheduleRepeatedTask(initialDelay: .zero, delay: interval) { [weak self] _ in self?.send(["WATCHDOG=1"]) }
        lock.withLock {
            watchdog?.cancel()
            watchdog = task
        }
    }

    /// A status is one line of the datagram.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}
