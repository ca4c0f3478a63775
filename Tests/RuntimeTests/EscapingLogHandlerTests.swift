import Logging
import Testing
import TrackerRuntime

/// No logged value can start a line of its own.
@Suite struct EscapingLogHandlerTests {
    @Test func controlCharactersAreEscaped() {
        #expect(EscapingLogHandler.escape("plain text: ok") == "plain text: ok")
        #expect(EscapingLogHandler.escape("a\nb\rc\td") == "a\\nb\\rc\\td")
        #expect(EscapingLogHandler.escape("\u{1B}[31mred\u{7F}\u{85}\u{2028}") == "\\u{1B}[31mred\\u{7F}\\u{85}\\u{2028}")
        #expect(EscapingLogHandler.escape("looks\\nescaped") == "looks\\\\nescaped", "a backslash in the text is doubled")
    }

    /// What reaches the wrapped handler: message and every metadata value, nested too.
    @Test func everyValueReachesTheWrappedHandlerEscaped() {
        final class Box: @unchecked Sendable { var events: [LogEvent] = [] }
        struct Capture: LogHandler {
            let box: Box
            var logLevel: Logger.Level = .trace
            var metadata: Logger.Metadata = [:]
            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }
            func log(event: LogEvent) { box.events.append(event) }
        }
        let box = Box()
        let logger = Logger(label: "t", factory: { _ in EscapingLogHandler(wrapping: Capture(box: box)) })
        logger.error("broker sent ERROR\nforged", metadata: [
            "message": "real\n2026-01-01T00:00:00+0000 critical tracker: forged",
            "nested": .dictionary(["k": .array([.string("x\ry")])]),
        ])
        let event = box.events.first
        #expect(event?.message.description == "broker sent ERROR\\nforged")
        #expect(event?.metadata?["message"] == .string("real\\n2026-01-01T00:00:00+0000 critical tracker: forged"))
        #expect(event?.metadata?["nested"] == .dictionary(["k": .array([.string("x\\ry")])]))
    }
}
