import Crypto
import Foundation

/// The secret every control request (anything but GET) must carry as
/// `Authorization: Bearer TOKEN`. Read from `--admin-token-file`, or drawn at start and
/// printed once, so a dashboard is never steerable by whoever can reach its port.
public struct AdminToken: Sendable {
    let value: String
    /// For printing the generated token once at start.
    public var secret: String { value }

    public static let minimumLength = 16

    init(value: String) { self.value = value }

    /// The first line of the file, surrounding spaces dropped; at least 16 characters.
    /// `flag` names the option in errors (the viewer token is read the same way).
    public init(file path: String, flag: String = "admin-token-file") throws(ConfigurationError) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError("--\(flag): cannot read \(path)")
        }
        let line = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        guard line.count >= Self.minimumLength, line.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            throw ConfigurationError("--\(flag) \(path): the first line must be a token of at least \(Self.minimumLength) printable ASCII characters")
        }
        value = line
    }

    /// 128 random bits as 32 hex digits.
    public static func generate() -> AdminToken {
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }
        return AdminToken(value: bytes.map { String(format: "%02x", $0) }.joined())
    }

    /// Compares in time independent of where the first difference is.
    func accepts(authorization header: String?) -> Bool {
        guard let header, header.hasPrefix("Bearer ") else { return false }
        let given = SHA256.hash(data: Data(header.dropFirst(7).utf8))
        let expected = SHA256.hash(data: Data(value.utf8))
        return zip(given, expected).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
