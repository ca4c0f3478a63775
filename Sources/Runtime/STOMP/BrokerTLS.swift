import Foundation
import NIOCore
import STOMP
import NIOSSL

/// TLS to the broker (`stomp+ssl://`): the broker's password and every peer address in
/// the cluster's traffic cross the network, so the connection is encrypted and the
/// broker proven by its certificate — chained to `--broker-ca-file` (or the system's
/// trust store) and naming the host we dialled (its DNS name, or its IP address when we
/// dialled one). A client certificate is offered when both its files are given.
///
/// Built once, before anything starts: a file that is missing, unreadable or not PEM is
/// a configuration error that names it, not a node that retries forever.
public enum BrokerTLS {
    /// The context for the settings' `stomp+ssl://` brokers; nil when none is TLS.
    public static func context(for settings: StompSettings) throws -> NIOSSLContext? {
        let tls = settings.brokers.contains { $0.tls }
        if !tls {
            for (flag, file) in [("--broker-ca-file", settings.caFile), ("--broker-cert-file", settings.certFile),
                                 ("--broker-key-file", settings.keyFile)] where file != nil {
                throw ConfigurationError("\(flag) is for stomp+ssl:// brokers; every broker given is plain stomp://")
            }
            return nil
        }
        var config = TLSConfiguration.makeClientConfiguration()
        config.minimumTLSVersion = .tlsv12
        config.certificateVerification = .fullVerification
        if let ca = settings.caFile {
            try readable(ca, flag: "--broker-ca-file")
            do {
                let roots = try NIOSSLCertificate.fromPEMFile(ca)
                guard !roots.isEmpty else { throw ConfigurationError("no certificate in it") }
                config.trustRoots = .certificates(roots)
            } catch {
                throw ConfigurationError("--broker-ca-file \(ca): not a PEM certificate file (\(error))")
            }
        }
        switch (settings.certFile, settings.keyFile) {
        case (nil, nil): break
        case (let cert?, let key?):
            try readable(cert, flag: "--broker-cert-file")
            try readable(key, flag: "--broker-key-file")
            do {
                config.certificateChain = try NIOSSLCertificate.fromPEMFile(cert).map { .certificate($0) }
            } catch {
                throw ConfigurationError("--broker-cert-file \(cert): not a PEM certificate file (\(error))")
            }
            do {
                config.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            } catch {
                throw ConfigurationError("--broker-key-file \(key): not a PEM private key (\(error))")
            }
        default:
            throw ConfigurationError("--broker-cert-file and --broker-key-file go together")
        }
        do {
            return try NIOSSLContext(configuration: config)
        } catch {
            throw ConfigurationError("broker TLS: \(error)")
        }
    }

    /// The handler that opens a TLS session to `broker` on a new connection.
    static func handler(_ context: NIOSSLContext, for broker: BrokerAddress) throws -> NIOSSLClientHandler {
        // SNI carries names only; an address dialled is checked against the certificate's
        // IP entries (NIOSSL does that when no name is given).
        let isAddress = (try? SocketAddress(ipAddress: broker.host, port: 0)) != nil
        return try NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : broker.host)
    }

    /// What an operator should read for a connection error (nil: not a TLS error).
    static func explain(_ error: Error, broker: BrokerAddress) -> String? {
        if let e = error as? NIOSSLExtraError, e == .failedToValidateHostname {
            return "TLS: the broker's certificate does not name \(broker.host), the host dialled"
        }
        if "\(error)".contains("CERTIFICATE_VERIFY_FAILED") {
            return "TLS: the broker's certificate does not verify against --broker-ca-file (or the system's trust store): \(error)"
        }
        if error is NIOSSLError || error is NIOSSLExtraError { return "TLS: \(error)" }
        return nil
    }

    static func readable(_ path: String, flag: String) throws {
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw ConfigurationError("\(flag) \(path): cannot read it")
        }
    }
}
