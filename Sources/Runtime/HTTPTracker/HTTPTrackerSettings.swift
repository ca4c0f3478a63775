import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import TrackerLogic

/// Where and how a node serves the HTTP tracker (`--http-tracker`).
public struct HTTPTrackerSettings: Sendable {
    /// The addresses listened on. In a cluster, the floating (or shared) service address:
    /// bound before it arrives (IP_FREEBIND), so only the node holding it accepts.
    public var binds: [PeerEndpoint]
    /// `--http-tracker-cert-file` / `--http-tracker-key-file`: HTTPS with this chain.
    public var certFile: String?
    public var keyFile: String?
    /// `--trusted-proxies`: whose `X-Forwarded-For` / `Forwarded` names the client.
    public var trustedProxies: TrustedProxies
    public var limits: HTTPTrackerLimits

    public init(binds: [PeerEndpoint], certFile: String? = nil, keyFile: String? = nil,
                trustedProxies: TrustedProxies = TrustedProxies(), limits: HTTPTrackerLimits = HTTPTrackerLimits()) {
        self.binds = binds; self.certFile = certFile; self.keyFile = keyFile
        self.trustedProxies = trustedProxies; self.limits = limits
    }

    public var tls: Bool { certFile != nil }

    /// The URL scheme clients use.
    public var scheme: String { tls ? "https" : "http" }
}

/// What the HTTP tracker may cost the node, whoever connects. It shares the node's
/// process and descriptors: no amount of HTTP may delay a keepalive or a UDP answer.
public struct HTTPTrackerLimits: Sendable {
    /// Connections open at once; more are closed as they arrive.
    public var maxConnections = 4096
    /// A connection that sends no complete request head for this long is closed:
    /// between requests, and during a head sent a byte at a time (slowloris).
    public var idleTimeout = TimeAmount.seconds(15)
    /// A request the core has not answered in this long gets a `failure reason` (a
    /// cluster whose master lost its quorum keeps it no longer).
    public var answerTimeout = TimeAmount.seconds(10)
    /// Requests waiting for the core at once, node-wide; more are refused at once.
    public var maxWaiting = 65_536
    /// Bytes a connection may have sent ahead of its unanswered request (pipelining) when
    /// more arrive, before it is closed.
    public var maxBufferedBytes = 2 * (HTTPRequestHead.maxHeadBytes + 4)

    public init() {}
}

/// The HTTPS certificate and key, read from their files at start and again at each
/// reload (SIGHUP): rotated certificates are taken without a restart. New connections
/// use the context read last; a reload that fails keeps the one before and says why.
public final class HTTPTrackerTLS: Sendable {
    let certFile: String
    let keyFile: String
    private let current: NIOLockedValueBox<NIOSSLContext>

    public init(certFile: String, keyFile: String) throws {
        self.certFile = certFile; self.keyFile = keyFile
        current = NIOLockedValueBox(try Self.load(certFile: certFile, keyFile: keyFile))
    }

    var context: NIOSSLContext { current.withLockedValue { $0 } }

    /// Reads both files again; throws (keeping the context in use) if either is unusable.
    public func reload() throws {
        let fresh = try Self.load(certFile: certFile, keyFile: keyFile)
        current.withLockedValue { $0 = fresh }
    }

    static func load(certFile: String, keyFile: String) throws -> NIOSSLContext {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certFile)
            guard !chain.isEmpty else { throw ConfigurationError("no certificate in it") }
        } catch {
            throw ConfigurationError("--http-tracker-cert-file \(certFile): not a readable PEM certificate file (\(error))")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: keyFile, format: .pem)
        } catch {
            throw ConfigurationError("--http-tracker-key-file \(keyFile): not a readable PEM private key (\(error))")
        }
        var config = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        config.minimumTLSVersion = .tlsv12
        do {
            return try NIOSSLContext(configuration: config)
        } catch {
            throw ConfigurationError("HTTP tracker TLS: the certificate and key do not make a TLS context (\(error))")
        }
    }
}
