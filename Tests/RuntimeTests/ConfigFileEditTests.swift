import Foundation
import Testing
import TrackerRuntime

/// A dashboard save changes the values edited and nothing else of the operator's file.
@Suite("Config file edits") struct ConfigFileEditTests {
    let file = """
        # node 1
        udp = "127.0.0.1:6969"   # where peers send
        interval = 1200 # seconds
          max-swarms=5000

        """

    @Test func aValueIsRewrittenInPlaceKeepingItsComment() {
        #expect(ConfigFileEdit.apply(["interval": "900"], to: file) == """
            # node 1
            udp = "127.0.0.1:6969"   # where peers send
            interval = 900 # seconds
              max-swarms=5000

            """)
    }

    @Test func aStringValueWithAHashIsReplacedWhole() {
        let text = "announce-limit = \"10/20 # not a comment\" # note\n"
        #expect(ConfigFileEdit.apply(["announce-limit": "off"], to: text) == "announce-limit = \"off\" # note\n")
    }

    @Test func aKeyNotSetYetIsAppended() {
        #expect(ConfigFileEdit.apply(["trust-announced-ip": "true", "connect-limit": "5/10"], to: file).hasSuffix("""
              max-swarms=5000
            connect-limit = "5/10"
            trust-announced-ip = true

            """))
    }

    /// A longer key sharing the prefix is another key; a commented-out line is not set.
    @Test func onlyTheExactKeyOnAnUncommentedLineIsEdited() {
        let text = "max-peers-per-swarm = 10\n# max-peers = 3\n"
        #expect(ConfigFileEdit.apply(["max-peers": "7"], to: text) == "max-peers-per-swarm = 10\n# max-peers = 3\nmax-peers = 7\n")
    }

    @Test func stringsAreEscaped() {
        #expect(ConfigFileEdit.apply(["x": "a\"b\\c\nd"], to: "") == "x = \"a\\\"b\\\\c\\nd\"\n")
    }

    /// The save keeps the mode, writes no fixed name (a link planted at FILE.new stays
    /// untouched), leaves nothing behind, and a refused candidate changes nothing.
    @Test func aReplaceKeepsTheModeAndFollowsNoPlantedLink() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cfg-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/node.toml", victim = dir + "/victim"
        try "interval = 1\n".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        try "precious".write(toFile: victim, atomically: false, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: path + ".new", withDestinationPath: victim)
        try ConfigFileEdit.replace(path, with: "interval = 2\n") { _ in }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "interval = 2\n")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious")
        var st = stat()
        #expect(lstat(path, &st) == 0 && st.st_mode & 0o777 == 0o600 && st.st_mode & S_IFMT == S_IFREG)
        struct Refused: Error {}
        #expect(throws: Refused.self) { try ConfigFileEdit.replace(path, with: "bad") { _ in throw Refused() } }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "interval = 2\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["node.toml", "node.toml.new", "victim"])
    }
}
