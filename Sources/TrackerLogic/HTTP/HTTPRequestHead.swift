/// One HTTP/1.x request head read from hostile bytes, as the HTTP tracker takes it: a GET
/// with no body. Parsing is total and bounded: it looks at most `maxHeadBytes` bytes,
/// `maxHeaderLines` header lines, and keeps only the headers the tracker reads.
///
/// Why a parser of our own: the tracker's requests are one line of query and a few
/// headers, and every byte a client sends before its head completes costs the node memory
/// a slow client holds. Bounding that here (and fuzzing it, `Fuzz/HttpFuzz.swift`) keeps
/// the listener's per-connection cost known.
public struct HTTPRequestHead: Hashable, Sendable {
    public enum Method: Hashable, Sendable { case get, head }

    public var method: Method
    /// The request target as sent: path, then `?` and the query.
    public var target: [UInt8]
    /// HTTP/1.1 keeps the connection unless `Connection: close`; HTTP/1.0 closes it
    /// unless `Connection: keep-alive`.
    public var keepAlive: Bool
    /// `X-Forwarded-For` values, joined in order with commas (read only from trusted proxies).
    public var forwardedFor: [UInt8]?
    /// `Forwarded` (RFC 7239) values, joined in order with commas.
    public var forwarded: [UInt8]?

    public init(method: Method, target: [UInt8], keepAlive: Bool, forwardedFor: [UInt8]? = nil, forwarded: [UInt8]? = nil) {
        self.method = method; self.target = target; self.keepAlive = keepAlive
        self.forwardedFor = forwardedFor; self.forwarded = forwarded
    }

    /// The longest head read: a request line with the longest query, and room for headers.
    public static let maxHeadBytes = HTTPTrackerQuery.maxQueryBytes + 8192
    public static let maxHeaderLines = 64

    /// The path, without the query.
    public var path: ArraySlice<UInt8> {
        target[..<(target.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex)]
    }

    /// The query (after the first `?`), empty if none.
    public var query: ArraySlice<UInt8> {
        guard let q = target.firstIndex(of: UInt8(ascii: "?")) else { return [] }
        return target[(q + 1)...]
    }

    /// What the first bytes of `buffer` hold.
    public enum Parsed: Hashable, Sendable {
        /// No complete head yet, and not too much to wait for more.
        case incomplete
        /// A head, ending `length` bytes in.
        case head(HTTPRequestHead, length: Int)
        /// Not a request the tracker takes; answer with the refusal and close.
        case refused(HTTPHeadRefusal)
    }

    public static func parse(_ buffer: some Collection<UInt8>) -> Parsed {
        let bytes = Array(buffer.prefix(maxHeadBytes + 4))
        guard let end = headEnd(bytes) else {
            return bytes.count > maxHeadBytes ? .refused(.headTooLarge) : .incomplete
        }
        guard end.body <= maxHeadBytes + 4 else { return .refused(.headTooLarge) }
        var lines = LineRanges(bytes[..<end.head])
        guard let requestRange = lines.next() else { return .refused(.badRequest("empty request")) }
        let requestLine = bytes[requestRange]
        var counting = lines, headerLines = 0
        while counting.next() != nil {
            headerLines += 1
            guard headerLines <= maxHeaderLines else { return .refused(.headTooLarge) }
        }
        // Three words, one space apart.
        guard let firstSpace = requestLine.firstIndex(of: UInt8(ascii: " ")),
              let secondSpace = requestLine[(firstSpace + 1)...].firstIndex(of: UInt8(ascii: " ")),
              !requestLine[(secondSpace + 1)...].contains(UInt8(ascii: " ")) else {
            return .refused(.badRequest("malformed request line"))
        }
        let methodWord = requestLine[..<firstSpace], targetWord = requestLine[(firstSpace + 1)..<secondSpace]
        let versionWord = requestLine[(secondSpace + 1)...]
        let method: Method
        if methodWord.elementsEqual(Token.get) { method = .get }
        else if methodWord.elementsEqual(Token.head) { method = .head }
        else { return .refused(.methodNotAllowed) }
        guard targetWord.first == UInt8(ascii: "/"), targetWord.allSatisfy(isTargetByte) else {
            return .refused(.badRequest("malformed request target"))
        }
        let http11: Bool
        if versionWord.elementsEqual(Token.http11) { http11 = true }
        else if versionWord.elementsEqual(Token.http10) { http11 = false }
        else { return .refused(.versionNotSupported) }
        var head = HTTPRequestHead(method: method, target: Array(targetWord), keepAlive: http11, forwardedFor: nil, forwarded: nil)
        var connection: [UInt8]?
        while let range = lines.next() {
            let line = bytes[range]
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                  line[line.startIndex..<colon].allSatisfy(isTokenByte) else {
                // A name with no colon, or a line folded onto the last (obsolete, and a
                // way to smuggle a header past a proxy).
                return .refused(.badRequest("malformed header line"))
            }
            let name = line[line.startIndex..<colon]
            let value = trimmed(line[(colon + 1)...])
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                return .refused(.badRequest("control byte in a header value"))
            }
            if isName(name, Token.contentLength) {
                guard value.allSatisfy({ $0 == UInt8(ascii: "0") }), !value.isEmpty else { return .refused(.bodyNotAllowed) }
            } else if isName(name, Token.transferEncoding) {
                return .refused(.bodyNotAllowed)
            } else if isName(name, Token.connection) {
                connection = joined(connection, value.map(lowercased))
            } else if isName(name, Token.xForwardedFor) {
                head.forwardedFor = joined(head.forwardedFor, Array(value))
            } else if isName(name, Token.forwarded) {
                head.forwarded = joined(head.forwarded, Array(value))
            }
        }
        if let connection {
            let options = connection.split(separator: UInt8(ascii: ",")).map { Array(trimmed($0)) }
            if options.contains(Token.close) { head.keepAlive = false }
            else if options.contains(Token.keepAlive) { head.keepAlive = true }
        }
        return .head(head, length: end.body)
    }

    /// Whether a header's name is `lowercaseName`, in any case.
    static func isName(_ name: ArraySlice<UInt8>, _ lowercaseName: [UInt8]) -> Bool {
        name.count == lowercaseName.count && zip(name, lowercaseName).allSatisfy { lowercased($0) == $1 }
    }

    /// Where the head ends (before its blank line) and the next request begins. Lines end
    /// with CRLF, or a bare LF, which RFC 9112 lets a recipient take.
    static func headEnd(_ bytes: [UInt8]) -> (head: Int, body: Int)? {
        var i = 0
        while let lf = bytes[i...].firstIndex(of: 0x0A) {
            let next = lf + 1
            if next < bytes.count, bytes[next] == 0x0A { return (lf, next + 1) }
            if next + 1 < bytes.count, bytes[next] == 0x0D, bytes[next + 1] == 0x0A { return (lf, next + 2) }
            i = next
        }
        return nil
    }

    /// The lines of a head, each without its line end, in order.
    struct LineRanges: IteratorProtocol {
        let head: ArraySlice<UInt8>
        var start: Int

        init(_ head: ArraySlice<UInt8>) { self.head = head; start = head.startIndex }

        mutating func next() -> Range<Int>? {
            guard start < head.endIndex else { return nil }
            let lf = head[start...].firstIndex(of: 0x0A) ?? head.endIndex
            var end = lf
            if end > start, head[end - 1] == 0x0D { end -= 1 }
            defer { start = lf + 1 }
            return start..<end
        }
    }

    /// The words the parser compares with, made once.
    enum Token {
        static let get = Array("GET".utf8), head = Array("HEAD".utf8)
        static let http11 = Array("HTTP/1.1".utf8), http10 = Array("HTTP/1.0".utf8)
        static let contentLength = Array("content-length".utf8), transferEncoding = Array("transfer-encoding".utf8)
        static let connection = Array("connection".utf8), xForwardedFor = Array("x-forwarded-for".utf8)
        static let forwarded = Array("forwarded".utf8), close = Array("close".utf8), keepAlive = Array("keep-alive".utf8)
        static let tchar = Set("!#$%&'*+-.^_`|~".utf8)
    }

    static func joined(_ earlier: [UInt8]?, _ value: [UInt8]) -> [UInt8] {
        guard let earlier else { return value }
        return earlier + Array(", ".utf8) + value
    }

    static func trimmed(_ s: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var s = s
        while let f = s.first, f == 0x20 || f == 0x09 { s = s.dropFirst() }
        while let l = s.last, l == 0x20 || l == 0x09 { s = s.dropLast() }
        return s
    }

    static func lowercased(_ b: UInt8) -> UInt8 { (0x41...0x5A).contains(b) ? b | 0x20 : b }

    /// RFC 9110's tchar.
    static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        default: Token.tchar.contains(b)
        }
    }

    /// Visible ASCII: a target is percent-encoded, and a raw byte outside it (a space,
    /// a control, a high byte) is not a request the tracker reads.
    static func isTargetByte(_ b: UInt8) -> Bool { b > 0x20 && b < 0x7F }
}

/// Why a head was refused: the status to answer with before closing the connection.
public enum HTTPHeadRefusal: Hashable, Sendable {
    case badRequest(String)
    case headTooLarge
    case methodNotAllowed
    case bodyNotAllowed
    case versionNotSupported

    public var status: (code: Int, reason: String) {
        switch self {
        case .badRequest: (400, "Bad Request")
        case .headTooLarge: (431, "Request Header Fields Too Large")
        case .methodNotAllowed: (405, "Method Not Allowed")
        case .bodyNotAllowed: (413, "Content Too Large")
        case .versionNotSupported: (505, "HTTP Version Not Supported")
        }
    }

    public var message: String {
        switch self {
        case .badRequest(let why): why
        case .headTooLarge: "request head longer than \(HTTPRequestHead.maxHeadBytes) bytes or \(HTTPRequestHead.maxHeaderLines) headers"
        case .methodNotAllowed: "only GET is served"
        case .bodyNotAllowed: "tracker requests carry no body"
        case .versionNotSupported: "only HTTP/1.0 and HTTP/1.1 are served"
        }
    }
}
