import Foundation
import Logging
import Testing
import TrackerRuntime

/// `--log-format json`: every line one whole JSON object, whatever the values hold.
@Suite struct JSONLogHandlerTests {
    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func aLineHasItsKeysInOrder() {
        let line = JSONLogHandler.line(time: Date(timeIntervalSince1970: 1_795_666_800.125), level: .notice, node: 3, role: "master",
                                       label: "tracker", message: "cluster role", fields: ["epoch": "7.3", "serving": "true"])
        #expect(text(line) == #"{"time":"2026-11-26T04:20:00.125Z","level":"notice","node":3,"role":"master","label":"tracker","message":"cluster role","fields":{"epoch":"7.3","serving":"true"}}"#)
    }

    @Test func noIDYetIsNullAndNoFieldsIsNoKey() {
        let line = JSONLogHandler.line(time: Date(timeIntervalSince1970: 0), level: .info, node: nil, role: "starting",
                                       label: "tracker", message: "m", fields: [:])
        #expect(text(line) == #"{"time":"1970-01-01T00:00:00.000Z","level":"info","node":null,"role":"starting","label":"tracker","message":"m"}"#)
    }

    /// Quotes, backslashes, controls, DEL, C1 and the line separators are escaped; other
    /// text stays UTF-8; nested values keep their shape.
    @Test func valuesFromOutsideCannotEndTheObjectOrTheLine() throws {
        let hostile = "a\"b\\c\nd\re\tf\u{1B}g\u{7F}h\u{85}i\u{2028}j é"
        let line = JSONLogHandler.line(time: Date(timeIntervalSince1970: 0), level: .error, node: 1, role: "slave", label: "tracker",
                                       message: hostile, fields: ["nested": .dictionary(["k": .array([.string("x\"}"), .stringConvertible(42)])])])
        #expect(!line.contains(UInt8(ascii: "\n")) && !line.contains(UInt8(ascii: "\r")))
        #expect(text(line).contains(#""message":"a\"b\\c\nd\re\tf\u001bg\u007fh\u0085i\u2028j é""#))
        #expect(text(line).hasSuffix(#""fields":{"nested":{"k":["x\"}","42"]}}}"#))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
        #expect(object["message"] as? String == hostile)
    }

    @Test func timestampsBeforeTheEpochRoundDown() {
        let line = JSONLogHandler.line(time: Date(timeIntervalSince1970: -0.5), level: .info, node: nil, role: "r", label: "l",
                                       message: "", fields: [:])
        #expect(text(line).hasPrefix(#"{"time":"1969-12-31T23:59:59.500Z""#))
    }
}
