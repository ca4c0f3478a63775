import Logging

/// A log handler that escapes control characters in every message and metadata value
/// before the handler it wraps writes them.
///
/// Much of what a node logs came from outside: a broker's ERROR message, a peer's or an
/// HTTP client's text, a file's contents in an error. A value holding a newline would
/// start a line of its own, written to look like one of ours (a broker's ERROR frame did
/// exactly that). Escaping here covers every value logged, present and future, instead of
/// every call site remembering to.
public struct EscapingLogHandler: LogHandler {
    var wrapped: any LogHandler
    /// With a context, the level is the process's (`LogContext.level`, which a reload
    /// changes), raised by this logger's own if it set one.
    let context: LogContext?
    var floor: Logger.Level?

    public init(wrapping handler: any LogHandler, context: LogContext? = nil) {
        wrapped = handler
        self.context = context
    }

    public var logLevel: Logger.Level {
        get {
            guard let context else { return wrapped.logLevel }
            return max(context.level, floor ?? .trace)
        }
        set {
            if context == nil { wrapped.logLevel = newValue } else { floor = newValue }
        }
    }

    public var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue.mapValues(Self.escape) }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue.map(Self.escape) }
    }

    public func log(event: LogEvent) {
        var event = event
        event.message = Logger.Message(stringLiteral: Self.escape(event.message.description))
        event.metadata = event.metadata.map { $0.mapValues(Self.escape) }
        wrapped.log(event: event)
    }

    /// C0 and C1 controls, DEL and the Unicode line and paragraph separators as escapes
    /// (`\n`, `\r`, `\t`, `\u{1B}`); a backslash doubled, so an escape in the text cannot
    /// pass for one of ours. Text without any is returned as it is.
    public static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\\": out += "\\\\"
            default:
                if needsEscape(scalar) {
                    out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    static func needsEscape(_ s: Unicode.Scalar) -> Bool {
        s.value < 0x20 || (0x7F...0x9F).contains(s.value) || s.value == 0x2028 || s.value == 0x2029 || s == "\\"
    }

    static func escape(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let s): return .string(escape(s))
        case .stringConvertible(let c): return .string(escape(c.description))
        case .dictionary(let d): return .dictionary(d.mapValues(escape))
        case .array(let a): return .array(a.map(escape))
        }
    }
}
