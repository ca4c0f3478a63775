import NIOCore
import Testing
import TrackerLogic

/// Random values, encoded and decoded, come back equal; random bytes never trap.
@Suite("Codec properties")
struct PropertyTests {
    static func randomHash(_ rng: inout SeededGenerator) -> Bytes20 {
        Bytes20(a: rng.next(), b: rng.next(), c: UInt32(truncatingIfNeeded: rng.next()))
    }

    static func randomEndpoint(_ rng: inout SeededGenerator, family: IPAddress.Family) -> PeerEndpoint {
        let ip: IPAddress = family == .v4 ? .v4(UInt32(truncatingIfNeeded: rng.next())) : .v6(rng.next(), rng.next())
        return PeerEndpoint(ip: ip, port: UInt16(truncatingIfNeeded: rng.next()))
    }

    static func randomRequest(_ rng: inout SeededGenerator) -> TrackerRequest {
        let tid = UInt32(truncatingIfNeeded: rng.next())
        switch rng.below(3) {
        case 0: return .connect(ConnectRequest(transactionID: tid))
        case 1:
            return .announce(AnnounceRequest(
                connectionID: rng.next(), transactionID: tid, infoHash: randomHash(&rng), peerID: randomHash(&rng),
                downloaded: Int64(bitPattern: rng.next()), left: Int64(bitPattern: rng.next()), uploaded: Int64(bitPattern: rng.next()),
                event: AnnounceEvent.allCases[rng.below(4)], ip: UInt32(truncatingIfNeeded: rng.next()),
                key: UInt32(truncatingIfNeeded: rng.next()), numWant: Int32(truncatingIfNeeded: rng.next()),
                port: UInt16(truncatingIfNeeded: rng.next())))
        default:
            return .scrape(ScrapeRequest(connectionID: rng.next(), transactionID: tid,
                                         infoHashes: (0..<(1 + rng.below(74))).map { _ in randomHash(&rng) }))
        }
    }

    @Test func requestsRoundTrip() throws {
        var rng = SeededGenerator(seed: 1)
        for _ in 0..<5_000 {
            let request = Self.randomRequest(&rng)
            #expect(try BEP15Codec.decodeRequest(BEP15Codec.encode(request)).get() == request)
        }
    }

    @Test(arguments: [IPAddress.Family.v4, .v6])
    func responsesRoundTrip(family: IPAddress.Family) throws {
        var rng = SeededGenerator(seed: 2)
        for _ in 0..<5_000 {
            let tid = UInt32(truncatingIfNeeded: rng.next())
            let response: TrackerResponse
            switch rng.below(4) {
            case 0: response = .connect(ConnectResponse(transactionID: tid, connectionID: rng.next()))
            case 1:
                response = .announce(AnnounceResponse(
                    transactionID: tid, interval: UInt32(truncatingIfNeeded: rng.next()), leechers: UInt32(truncatingIfNeeded: rng.next()),
                    seeders: UInt32(truncatingIfNeeded: rng.next()),
                    peers: (0..<rng.below(60)).map { _ in Self.randomEndpoint(&rng, family: family) }))
            case 2:
                response = .scrape(ScrapeResponse(transactionID: tid, entries: (0..<rng.below(75)).map { _ in
                    ScrapeEntry(seeders: UInt32(truncatingIfNeeded: rng.next()), completed: UInt32(truncatingIfNeeded: rng.next()),
                                leechers: UInt32(truncatingIfNeeded: rng.next()))
                }))
            default:
                response = .error(ErrorResponse(transactionID: tid, message: "error \(rng.next())"))
            }
            #expect(try BEP15Codec.decodeResponse(BEP15Codec.encode(response), family: family).get() == response)
        }
    }

    /// 100k random datagrams: biased towards valid headers so the deep paths are reached.
    @Test func decodingIsTotal() throws {
        var rng = SeededGenerator(seed: 3)
        var outcomes = [0, 0, 0, 0]
        let handler = PeerRequestHandler(config: TrackerConfig(),
                                         connectionIDs: ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2)))
        var tracker = StandaloneTracker(handler: handler, seed: 4)
        let source = PeerEndpoint(ip: v4("10.1.2.3"), port: 4000)
        for i in 0..<100_000 {
            let length = rng.below(4) == 0 ? rng.below(16) : rng.below(200)
            var raw = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if length >= 16 && rng.chance(0.6) {
                raw[11] = UInt8(rng.below(5))  // a plausible action
                raw[8] = 0; raw[9] = 0; raw[10] = 0
                if raw[11] == 0 && rng.chance(0.5) { raw.replaceSubrange(0..<8, with: bytes("0000041727101980")) }
            }
            let datagram = ByteBuffer(bytes: raw)
            switch BEP15Codec.decodeRequest(datagram) {
            case .success(.connect): outcomes[0] += 1
            case .success(.announce): outcomes[1] += 1
            case .success(.scrape): outcomes[2] += 1
            case .failure: outcomes[3] += 1
            }
            _ = BEP15Codec.decodeResponse(datagram, family: i % 2 == 0 ? .v4 : .v6)
            _ = tracker.receive(datagram, from: source, now: Instant(milliseconds: Int64(i)))
        }
        #expect(outcomes.allSatisfy { $0 > 100 }, "every decoder path was reached: \(outcomes)")
    }
}
