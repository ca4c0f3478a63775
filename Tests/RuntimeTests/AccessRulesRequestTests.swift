import Foundation
import Testing
import TrackerLogic
import TrackerRuntime

/// The bodies the dashboard's rule endpoints take: each a catalogue change, or nil (a 400
/// with nothing submitted) for anything else.
@Suite("Access rule requests") struct AccessRulesRequestTests {
    let hash = String(repeating: "ab", count: 20)

    func body(_ json: String) -> Data { Data(json.utf8) }

    @Test func hashRules() throws {
        let h = try #require(InfoHash(hex: hash))
        #expect(AccessRulesRequest.change(body(#"{"rule": "allow", "infoHashes": ["\#(hash)"]}"#)) == .setAccessRule(.allow, [h]))
        #expect(AccessRulesRequest.change(body(#"{"rule": "deny", "infoHashes": ["\#(hash)"]}"#)) == .setAccessRule(.deny, [h]))
        #expect(AccessRulesRequest.change(body(#"{"rule": "remove", "infoHashes": ["\#(hash)"]}"#)) == .removeAccessRules([h]))
        let many = "[" + Array(repeating: "\"\(hash)\"", count: AccessPolicy.maxHashesPerChange + 1).joined(separator: ",") + "]"
        for bad in [#"{"rule": "block", "infoHashes": ["\#(hash)"]}"#, #"{"rule": "allow", "infoHashes": ["abc"]}"#,
                    #"{"rule": "allow", "infoHashes": []}"#, #"{"rule": "allow"}"#, "not json", #"{"rule": "allow", "infoHashes": \#(many)}"#,
                    #"{"rule": "allow", "prefixes": ["-UT"]}"#] {
            #expect(AccessRulesRequest.change(body(bad)) == nil, "\(bad.prefix(60))")
        }
    }

    @Test func clientRules() throws {
        let ut = try #require(ClientPrefix("-UT355-")), bin = try #require(ClientPrefix(bytes: [0, 0xFF]))
        #expect(AccessRulesRequest.clientChange(body(#"{"rule": "deny", "prefixes": ["-UT355-", "0x00ff"]}"#)) == .setClientRule(.deny, [ut, bin]))
        #expect(AccessRulesRequest.clientChange(body(#"{"rule": "allow", "prefixes": ["-UT355-"]}"#)) == .setClientRule(.allow, [ut]))
        #expect(AccessRulesRequest.clientChange(body(#"{"rule": "remove", "prefixes": ["-UT355-"]}"#)) == .removeClientRules([ut]))
        for bad in [#"{"rule": "deny", "prefixes": ["-UT 355-"]}"#, #"{"rule": "deny", "prefixes": [""]}"#,
                    #"{"rule": "deny", "prefixes": ["0x0"]}"#, #"{"rule": "deny", "prefixes": ["\#(String(repeating: "A", count: 21))"]}"#,
                    #"{"rule": "deny", "prefixes": []}"#, #"{"rule": "deny", "infoHashes": ["\#(hash)"]}"#] {
            #expect(AccessRulesRequest.clientChange(body(bad)) == nil, "\(bad.prefix(60))")
        }
    }
}
