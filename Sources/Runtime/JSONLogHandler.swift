import Foundation
import Logging
import NIOConcurrencyHelpers

/// What every log line of the process shares and what changes while it runs: the node's
/// id and role (an id drawn from the master, an election), which the host that knows them
/// sets, and the log level, which a reload (SIGHUP) may change. Handlers read them at each
/// line, so no call site passes them.
public final class LogContext: Sendable {
    struct Value {
        var node: UInt32?
        var role: String
    }
    let value: NIOLockedValueBox<Value>
    let levelBox: NIOLockedValueBox<Logger.Level>

    public init(role: String, level: Logger.Level) {
        value = NIOLockedValueBox(Value(node: nil, role: role))
        levelBox = NIOLockedValueBox(level)
    }

    /// A node id of 0 is no id yet.
    public func set(node: UInt32, role: String) {
        value.withLockedValue { $0 = Value(node: node == 0 ? nil : node, role: role) }
    }

    /// The least severe level written, for every logger of the process.
    public var level: Logger.Level {
        get { levelBox.withLockedValue { $0 } }
        set { levelBox.withLockedValue { $0 = newValue } }
    }

    var current: Value { value.withLockedValue { $0 } }
}

/// `--log-format json`: one JSON object per line on standard error, for journald and
/// Loki. Keys, in this order: `time` (RFC 3339, UTC, milliseconds), `level`, `node` (null
/// before the node has an id, and on a standalone node), `role`, `label`, `message`, then
/// `fields` (the event's metadata, keys sorted; omitted when empty).
///
/// Invariant: every line is a whole JSON object. A message or value is text from outside
/// as often as not (a broker's ERROR, a file's contents): it is escaped as JSON requires,
/// so no value can end the object or start a line of its own. Each line goes out in one
/// `write`, so lines of concurrent loggers never interleave.
public struct JSONLogHandler: LogHandler {
    /// The process's level (`LogContext.level`), raised by this logger's own if it set one.
    public var logLevel: Logger.Level {
        get { max(context.level, floor ?? .trace) }
        set { floor = newValue }
    }
    var floor: Logger.Level?
    public var metadata: Logger.Metadata = [:]
    let label: String
    let context: LogContext

    public init(label: String, context: LogContext) {
        self.label = label
        self.context = context
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        let who = context.current
        var line = Self.line(time: Date(), level: event.level, node: who.node, role: who.role, label: label,
                             message: event.message.description, fields: fields)
        line.append(UInt8(ascii: "\n"))
        Self.writeToStandardError(line)
    }

    /// One log line, without its newline: pure, so its bytes are tested exactly.
    public static func line(time: Date, level: Logger.Level, node: UInt32?, role: String, label: String,
                            message: String, fields: Logger.Metadata) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160 + message.utf8.count)
        out += Array("{\"time\":\"".utf8)
        out += Array(timestamp(time).utf8)
        out += Array("\",\"level\":\"".utf8)
        out += Array(level.rawValue.utf8)
        out += Array("\",\"node\":".utf8)
        out += Array((node.map { String($0) } ?? "null").utf8)
        out += Array(",\"role\":".utf8)
        appendString(role, to: &out)
        out += Array(",\"label\":".utf8)
        appendString(label, to: &out)
        out += Array(",\"message\":".utf8)
        appendString(message, to: &out)
        if !fields.isEmpty {
            out += Array(",\"fields\":".utf8)
            appendObject(fields, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `2026-11-26T04:20:00.123Z`.
    static func timestamp(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let ms = Int(millis - seconds * 1000)
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(ms), 3))Z"
    }

    static func appendObject(_ fields: Logger.Metadata, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (i, key) in fields.keys.sorted().enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            appendString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            if let value = fields[key] { appendValue(value, to: &out) }
        }
        out.append(UInt8(ascii: "}"))
    }

    static func appendValue(_ value: Logger.Metadata.Value, to out: inout [UInt8]) {
        switch value {
        case .string(let s): appendString(s, to: &out)
        case .stringConvertible(let c): appendString(c.description, to: &out)
        case .dictionary(let d): appendObject(d, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                appendValue(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    /// A JSON string: `"` and `\` escaped, every control character (C0, DEL, C1) and the
    /// Unicode line separators as `\uXXXX`, so a reader that splits on them cannot be fooled;
    /// other text is copied as UTF-8.
    static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case "\\": out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case "\n": out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case "\r": out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case "\t": out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            default:
                let v = scalar.value
                if v < 0x20 || (0x7F...0x9F).contains(v) || v == 0x2028 || v == 0x2029 {
                    out += Array("\\u".utf8)
                    let hex = String(v, radix: 16)
                    out += Array((String(repeating: "0", count: 4 - hex.count) + hex).utf8)
                } else {
                    UTF8.encode(scalar) { out.append($0) }
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    static let writeLock = NIOLock()

    static func writeToStandardError(_ bytes: [UInt8]) {
        writeLock.withLock {
            bytes.withUnsafeBytes { raw in
                guard let base = raw.baseAddress else { return }
                var offset = 0
                while offset < raw.count {
                    let n = write(STDERR_FILENO, base + offset, raw.count - offset)
                    if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
                }
            }
        }
    }
}
