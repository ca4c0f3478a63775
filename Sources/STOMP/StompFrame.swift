import NIOCore

/// One STOMP 1.2 frame. Headers keep their order and repeats: the spec says the first
/// occurrence of a repeated header wins, so lookups take the first.
public struct StompFrame: Equatable, Sendable {
    public var command: String
    public var headers: [(name: String, value: String)]
    public var body: ByteBuffer

    public init(_ command: String, headers: [(String, String)] = [], body: ByteBuffer = ByteBuffer()) {
        self.command = command
        self.headers = headers.map { (name: $0.0, value: $0.1) }
        self.body = body
    }

    public subscript(name: String) -> String? { headers.first { $0.name == name }?.value }

    public static func == (l: StompFrame, r: StompFrame) -> Bool {
        l.command == r.command && l.body == r.body
            && l.headers.map(\.name) == r.headers.map(\.name) && l.headers.map(\.value) == r.headers.map(\.value)
    }

    /// CONNECT and CONNECTED are the frames whose headers are never escaped (STOMP 1.2,
    /// "Value Encoding"): 1.0 brokers could not have parsed the escapes.
    public var escapesHeaders: Bool { command != "CONNECT" && command != "CONNECTED" }
}

public struct StompFrameError: Error, Equatable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// Frame limits, so a broken or hostile peer cannot make us buffer without bound.
public struct StompLimits: Sendable {
    public var maxHeaderLines = 128
    public var maxHeaderBytes = 64 * 1024
    /// The largest body the cluster sends is one frame of `ClusterChannel`: a fragment of
    /// at most 1 MiB with its header and tag. Four times that leaves room, and bounds
    /// what a hostile broker makes a node buffer.
    public var maxBodyBytes = 4 * 1024 * 1024
    public init() {}
}

/// STOMP 1.2 framing on a byte stream. Pure: it reads from and writes to `ByteBuffer`s,
/// so it is tested byte for byte without a socket.
public enum StompCodec {
    public static let commands: Set<String> = [
        "CONNECT", "STOMP", "CONNECTED", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK", "BEGIN",
        "COMMIT", "ABORT", "DISCONNECT", "MESSAGE", "RECEIPT", "ERROR",
    ]

    public static func encode(_ frame: StompFrame, into buffer: inout ByteBuffer) {
        buffer.writeString(frame.command)
        buffer.writeInteger(UInt8(ascii: "\n"))
        var hasLength = false
        for (name, value) in frame.headers {
            if name == "content-length" { hasLength = true }
            buffer.writeString(frame.escapesHeaders ? escape(name) : name)
            buffer.writeInteger(UInt8(ascii: ":"))
            buffer.writeString(frame.escapesHeaders ? escape(value) : value)
            buffer.writeInteger(UInt8(ascii: "\n"))
        }
        // A body may hold NUL bytes: only content-length lets the reader find its end.
        if !hasLength && frame.body.readableBytes > 0 {
            buffer.writeString("content-length:\(frame.body.readableBytes)\n")
        }
        buffer.writeInteger(UInt8(ascii: "\n"))
        var body = frame.body
        buffer.writeBuffer(&body)
        buffer.writeInteger(UInt8(0))
    }

    public static func encode(_ frame: StompFrame) -> ByteBuffer {
        var b = ByteBuffer()
        encode(frame, into: &b)
        return b
    }

    public enum Decoded: Equatable {
        case frame(StompFrame)
        /// An end-of-line between frames: a heart-beat.
        case heartbeat
    }

    /// Decodes one frame or heart-beat from the front of `buffer`, consuming it; nil when
    /// more bytes are needed (nothing is consumed then). Throws on a malformed frame.
    public static func decode(_ buffer: inout ByteBuffer, limits: StompLimits = StompLimits()) throws -> Decoded? {
        guard let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return nil }
        if first == UInt8(ascii: "\n") {
            buffer.moveReaderIndex(forwardBy: 1)
            return .heartbeat
        }
        if first == UInt8(ascii: "\r") {
            guard let second = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt8.self) else { return nil }
            guard second == UInt8(ascii: "\n") else { throw StompFrameError("bare carriage return between frames") }
            buffer.moveReaderIndex(forwardBy: 2)
            return .heartbeat
        }
        guard let head = try buffer.withUnsafeReadableBytes({ try header(of: $0, limits: limits) }) else { return nil }
        var frame = head.frame
        var cursor = buffer
        cursor.moveReaderIndex(forwardBy: head.length)
        if let lengthText = frame["content-length"] {
            guard let length = Int(lengthText), length >= 0 else { throw StompFrameError("bad content-length '\(lengthText.prefix(20))'") }
            guard length <= limits.maxBodyBytes else { throw StompFrameError("body of \(length) bytes over the limit") }
            guard cursor.readableBytes >= length + 1, let body = cursor.readSlice(length: length) else { return nil }
            frame.body = body
            guard cursor.readInteger(as: UInt8.self) == 0 else { throw StompFrameError("body not followed by NUL") }
        } else {
            guard let nul = cursor.readableBytesView.firstIndex(of: 0) else {
                if cursor.readableBytes > limits.maxBodyBytes { throw StompFrameError("body over the limit") }
                return nil
            }
            guard let body = cursor.readSlice(length: nul - cursor.readerIndex) else { return nil }
            frame.body = body
            cursor.moveReaderIndex(forwardBy: 1)
        }
        buffer = cursor
        return .frame(frame)
    }

    /// The command and headers at the front of `bytes`, and how many bytes they take with
    /// the empty line that ends them; nil when that line has not arrived. Lines are split
    /// and searched as bytes, each name and value made a `String` once: a broker's
    /// MESSAGE carries a dozen headers, and every PREPARE and vote is one.
    static func header(of bytes: UnsafeRawBufferPointer, limits: StompLimits) throws -> (frame: StompFrame, length: Int)? {
        var lines: [Range<Int>] = []
        var start = 0
        while true {
            guard let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) else {
                if bytes.count - start > limits.maxHeaderBytes { throw StompFrameError("header section over \(limits.maxHeaderBytes) bytes") }
                return nil
            }
            if newline + 1 > limits.maxHeaderBytes { throw StompFrameError("header section over \(limits.maxHeaderBytes) bytes") }
            var end = newline
            if end > start, bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            let line = start..<end
            if bytes[line].contains(0) { throw StompFrameError("NUL inside a header") }
            start = newline + 1
            if line.isEmpty { break }
            lines.append(line)
            if lines.count > limits.maxHeaderLines + 1 { throw StompFrameError("more than \(limits.maxHeaderLines) headers") }
        }
        func text(_ range: Range<Int>) -> String { String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self) }
        func unescaped(_ range: Range<Int>) throws -> String { try unescape(UnsafeRawBufferPointer(rebasing: bytes[range])) }
        // The loop above ends only at an empty line, so a frame that got here has a first
        // line unless the section is empty, which it is not: it began with neither LF nor CR.
        guard let first = lines.first else { throw StompFrameError("unknown command ''") }
        let command = text(first)
        guard commands.contains(command) else { throw StompFrameError("unknown command '\(command.prefix(40))'") }
        var frame = StompFrame(command)
        frame.headers.reserveCapacity(lines.count - 1)
        let escapes = frame.escapesHeaders
        for line in lines.dropFirst() {
            guard let colon = bytes[line].firstIndex(of: UInt8(ascii: ":")) else { throw StompFrameError("header without ':' in \(command)") }
            let name = line.lowerBound..<colon, value = (colon + 1)..<line.upperBound
            if escapes {
                frame.headers.append((try unescaped(name), try unescaped(value)))
            } else {
                frame.headers.append((text(name), text(value)))
            }
        }
        return (frame, start)
    }

    static func escape(_ s: String) -> String {
        guard s.utf8.contains(where: { $0 == 0x5C || $0 == 0x0A || $0 == 0x0D || $0 == 0x3A }) else { return s }
        var out = ""
        for ch in s.unicodeScalars {
            switch ch {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case ":": out += "\\c"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }

    /// A header's name or value from its bytes, its escapes undone. Undefined escapes are
    /// a fatal protocol error in STOMP 1.2. Bytes, not scalars: ActiveMQ escapes the
    /// colons of every MESSAGE's message-id.
    static func unescape(_ bytes: UnsafeRawBufferPointer) throws -> String {
        guard bytes.contains(UInt8(ascii: "\\")) else { return String(decoding: bytes, as: UTF8.self) }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            i += 1
            guard byte == UInt8(ascii: "\\") else { out.append(byte); continue }
            switch i < bytes.count ? bytes[i] : nil {
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "n"): out.append(UInt8(ascii: "\n"))
            case UInt8(ascii: "r"): out.append(UInt8(ascii: "\r"))
            case UInt8(ascii: "c"): out.append(UInt8(ascii: ":"))
            default:
                let next = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[i..<min(i + 4, bytes.count)]), as: UTF8.self)
                throw StompFrameError("undefined escape '\\\(next.unicodeScalars.first.map(String.init) ?? "")'")
            }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Frames from a byte stream in time linear in the bytes received.
///
/// `StompCodec.decode` parses a frame from the start of what has arrived; called again
/// after every read of a frame that is still arriving, it would scan the same bytes again
/// each time, quadratic in a large body sent in small writes. This decoder remembers how far it looked (the end of the header
/// section once found, the body's length, how far the search for its NUL got) and hands
/// the bytes to `StompCodec.decode` only once the whole frame is there.
public struct StompStreamDecoder: Sendable {
    let limits: StompLimits
    /// Bytes from the reader index already searched, for the blank line that ends the
    /// headers and then for the NUL that ends a body without content-length.
    private var scanned = 0
    /// Where the body starts, once the header section is complete.
    private var bodyStart: Int?
    /// The body's content-length, when it has one.
    private var bodyLength: Int?

    public init(limits: StompLimits = StompLimits()) { self.limits = limits }

    /// One frame or heart-beat from the front of `buffer`, consumed; nil when more bytes
    /// are needed (nothing consumed). Throws on a malformed or oversized frame.
    public mutating func decode(_ buffer: inout ByteBuffer) throws -> StompCodec.Decoded? {
        guard buffer.readableBytes > 0 else { return nil }
        let view = buffer.readableBytesView
        let base = view.startIndex
        if bodyStart == nil {
            if scanned == 0, let first = view.first, first == UInt8(ascii: "\n") || first == UInt8(ascii: "\r") {
                return try StompCodec.decode(&buffer, limits: limits)  // a heart-beat
            }
            // The header section ends at an empty line: a LF after LF, or after CR LF.
            var i = max(scanned, 1)
            while i < view.count {
                if view[base + i] == UInt8(ascii: "\n") {
                    let previous = view[base + i - 1]
                    if previous == UInt8(ascii: "\n") || (previous == UInt8(ascii: "\r") && i >= 2 && view[base + i - 2] == UInt8(ascii: "\n")) {
                        break
                    }
                }
                i += 1
            }
            guard i < view.count else {
                scanned = view.count
                if scanned > limits.maxHeaderBytes { throw StompFrameError("header section over \(limits.maxHeaderBytes) bytes") }
                return nil
            }
            bodyStart = i + 1
            scanned = i + 1
            switch Self.contentLength(view[base..<(base + i)]) {
            case .absent: break
            case .invalid: return try finish(&buffer)  // which says what is wrong with it
            case .bytes(let length):
                guard length <= limits.maxBodyBytes else { throw StompFrameError("body of \(length) bytes over the limit") }
                bodyLength = length
            }
        }
        guard let start = bodyStart else { return nil }
        if let length = bodyLength {
            return view.count > start + length ? try finish(&buffer) : nil
        }
        if view[(base + scanned)...].contains(0) { return try finish(&buffer) }
        scanned = view.count
        if scanned - start > limits.maxBodyBytes { throw StompFrameError("body over the limit") }
        return nil
    }

    /// The whole frame is there: decoded in one pass, and the search starts afresh.
    private mutating func finish(_ buffer: inout ByteBuffer) throws -> StompCodec.Decoded? {
        scanned = 0
        bodyStart = nil
        bodyLength = nil
        return try StompCodec.decode(&buffer, limits: limits)
    }

    enum ContentLength: Equatable { case absent, invalid, bytes(Int) }

    /// The first content-length header's value: the one STOMP 1.2 says counts.
    static func contentLength(_ headers: ByteBufferView.SubSequence) -> ContentLength {
        let name = Array("content-length:".utf8)
        var lineStart = headers.startIndex
        while lineStart < headers.endIndex {
            let lineEnd = headers[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? headers.endIndex
            let line = headers[lineStart..<lineEnd]
            if line.starts(with: name) {
                var digits = line.dropFirst(name.count)
                if digits.last == UInt8(ascii: "\r") { digits = digits.dropLast() }
                guard let n = Int(String(decoding: digits, as: UTF8.self)), n >= 0 else { return .invalid }
                return .bytes(n)
            }
            lineStart = lineEnd == headers.endIndex ? lineEnd : lineEnd + 1
        }
        return .absent
    }
}

/// NIO adapter: bytes in, `StompCodec.Decoded` out.
public struct StompFrameDecoder: ByteToMessageDecoder {
    public typealias InboundOut = StompCodec.Decoded
    var stream: StompStreamDecoder
    public init(limits: StompLimits = StompLimits()) { stream = StompStreamDecoder(limits: limits) }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let decoded = try stream.decode(&buffer) else { return .needMoreData }
        context.fireChannelRead(NIOAny(decoded))
        return .continue
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        return .needMoreData
    }
}

/// What a client writes: frames, and the bare end-of-lines that are heart-beats.
public enum StompOutbound: Sendable {
    case frame(StompFrame)
    case heartbeat
}

/// NIO adapter: frames and heart-beats out as bytes.
public struct StompFrameEncoder: MessageToByteEncoder {
    public typealias OutboundIn = StompOutbound
    public init() {}
    public func encode(data: StompOutbound, out: inout ByteBuffer) throws {
        switch data {
        case .frame(let frame): StompCodec.encode(frame, into: &out)
        case .heartbeat: out.writeInteger(UInt8(ascii: "\n"))
        }
    }
}
