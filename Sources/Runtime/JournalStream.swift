#if canImport(Glibc)
import Glibc
#endif
import Logging

/// Standard error as journald reads it: each text line starts with its syslog priority
/// (`<4>` for a warning), which journald strips and keeps, so `journalctl -p warning`
/// filters the node's lines. Used only when standard error is the journal's stream
/// (`isJournal`); anywhere else the prefix would be noise.
///
/// The level is read back from the line `StreamLogHandler` wrote (`TIME LEVEL label: …`):
/// one format, owned by swift-log, and `EscapingLogHandler` keeps every line one line.
public struct JournalStream: TextOutputStream, Sendable {
    public init() {}

    public mutating func write(_ line: String) {
        let text = "<\(Self.priority(ofLine: line))>" + line
        let bytes = Array(text.utf8)
        // One write(2) per line: lines of two threads never interleave.
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { rest in rest.baseAddress.map { Glibc.write(STDERR_FILENO, $0, rest.count) } ?? 0 }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }

    /// syslog(3)'s priority of the line's level (the second word of the line).
    static func priority(ofLine line: String) -> Int {
        let words = line.split(separator: " ", maxSplits: 2)
        guard words.count >= 2, let level = Logger.Level(rawValue: String(words[1])) else { return 6 }
        return priority(of: level)
    }

    public static func priority(of level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    /// Whether standard error is the stream systemd named in `JOURNAL_STREAM`
    /// (`DEVICE:INODE`); a child that inherited the variable but writes elsewhere is not.
    public static func isJournal(environment: [String: String]) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var s = stat()
        guard fstat(STDERR_FILENO, &s) == 0 else { return false }
        return UInt64(s.st_dev) == device && UInt64(s.st_ino) == inode
    }
}
