import NIOCore
import TrackerLogic

/// libFuzzer target: the BEP 15 request decoder and the request handler. Properties:
/// decoding is total; a decoded request re-encodes to bytes that decode to the same
/// request; the handler never traps, and no reply to a source without a valid
/// connection id is larger than the request.
nonisolated(unsafe) var bep15Tracker = StandaloneTracker(
    handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))), seed: 3)

@_cdecl("LLVMFuzzerTestOneInput")
public func bep15Fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = ByteBuffer(bytes: UnsafeBufferPointer(start: data, count: size))
    let now = Instant(milliseconds: 1_700_000_000_000)
    if case .success(let request) = BEP15Codec.decodeRequest(bytes) {
        let again = BEP15Codec.decodeRequest(BEP15Codec.encode(request))
        guard case .success(let same) = again, same == request else { fatalError("BEP 15 request does not round-trip") }
    }
    if case .success(let response) = BEP15Codec.decodeResponse(bytes, family: .v4) {
        guard case .success(let same) = BEP15Codec.decodeResponse(BEP15Codec.encode(response), family: .v4), same == response else {
            fatalError("BEP 15 response does not round-trip")
        }
    }
    let source = PeerEndpoint(ip: .v4(0xC633_6407), port: 6881)
    if let reply = bep15Tracker.receive(bytes, from: source, now: now) {
        let proven: Bool
        switch BEP15Codec.decodeRequest(bytes) {
        case .success(.announce(let r)): proven = bep15Tracker.handler.connectionIDs.isValid(r.connectionID, for: source.ip, now: now)
        case .success(.scrape(let r)): proven = bep15Tracker.handler.connectionIDs.isValid(r.connectionID, for: source.ip, now: now)
        default: proven = false
        }
        if !proven && BEP15Codec.encode(reply).readableBytes > size { fatalError("amplification: \(size)-byte request, larger reply") }
    }
    return 0
}
