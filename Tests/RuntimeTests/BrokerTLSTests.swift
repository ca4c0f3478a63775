import Foundation
import Testing
import TrackerRuntime
import STOMP

/// `--broker` schemes and the TLS settings: what parses, what is refused before start.
@Suite struct BrokerTLSTests {
    @Test func schemesParseAndMixInAFailoverList() throws {
        let s = try StompSettings(url: "stomp+ssl://broker-a.example:61614,stomp://127.0.0.1:61613")
        #expect(s.brokers == [BrokerAddress(host: "broker-a.example", port: 61614, tls: true),
                              BrokerAddress(host: "127.0.0.1", port: 61613, tls: false)])
        #expect(s.brokers.map(\.url) == ["stomp+ssl://broker-a.example:61614", "stomp://127.0.0.1:61613"])
        #expect(throws: BrokerURLError.self) { try StompSettings(url: "ssl://a:1") }
        #expect(throws: BrokerURLError.self) { try StompSettings(url: "stomp://a:1,stomp+ssl://a:1") }
    }

    /// Only loopback keeps a plain connection's password and traffic on the machine.
    @Test func loopbackIsThisMachineOnly() {
        for host in ["127.0.0.1", "127.9.8.7", "::1"] { #expect(BrokerAddress(host: host, port: 1).isLoopback, "\(host)") }
        for host in ["10.0.0.1", "128.0.0.1", "127.0.0", "localhost.example", "127.0.0.256", "::2"] {
            #expect(!BrokerAddress(host: host, port: 1).isLoopback, "\(host)")
        }
    }

    @Test func noTLSBrokerNeedsNoContextAndRefusesTLSFiles() throws {
        var s = try StompSettings(url: "stomp://127.0.0.1:61613")
        #expect(try BrokerTLS.context(for: s) == nil)
        s.caFile = "/etc/ssl/certs/ca-certificates.crt"
        #expect(throws: ConfigurationError.self) { try BrokerTLS.context(for: s) }
    }

    @Test func badFilesAreNamed() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("broker-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let notPEM = dir.appendingPathComponent("not.pem").path
        try "hello\n".write(toFile: notPEM, atomically: true, encoding: .utf8)
        var s = try StompSettings(url: "stomp+ssl://127.0.0.1:61614")
        for (ca, named) in [(dir.appendingPathComponent("missing.pem").path, "missing.pem"), (notPEM, "not.pem")] {
            s.caFile = ca
            do {
                _ = try BrokerTLS.context(for: s)
                Issue.record("\(ca) accepted")
            } catch {
                #expect("\(error)".contains(named) && "\(error)".contains("--broker-ca-file"), "\(error)")
            }
        }
        s.caFile = nil
        s.certFile = notPEM
        #expect(throws: ConfigurationError.self) { try BrokerTLS.context(for: s) }
    }
}
