import NIOCore
import Testing
import TrackerLogic

@Suite("BEP 15 byte layouts")
struct CodecVectorTests {
    /// An info hash's twenty bytes and forty hex digits, in wire order (the SQLite rows
    /// and the dashboard show the digits).
    @Test func bytes20InWireOrderAndHex() throws {
        let bytes: [UInt8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0x00, 0xFF, 0x10, 0x0F, 0xA0, 0x0A, 0x7F, 0x80, 0xDE, 0xAD, 0xBE, 0xEF]
        let value = try #require(Bytes20(bytes: bytes))
        #expect(value.bytes == bytes)
        #expect(value.hex == "0123456789abcdef00ff100fa00a7f80deadbeef")
        #expect(Bytes20(hex: "0123456789ABCDEF00FF100FA00A7F80DEADBEEF") == value)
        #expect(Bytes20(a: 0, b: 0, c: 0).hex == String(repeating: "0", count: 40))
        #expect(Bytes20(a: .max, b: .max, c: .max).hex == String(repeating: "f", count: 40))
    }

    @Test func connectRequestBytes() throws {
        let request = TrackerRequest.connect(ConnectRequest(transactionID: 0xDEAD_BEEF))
        let expected = bytes("0000041727101980 00000000 deadbeef")
        #expect(BEP15Codec.encode(request).allBytes == expected)
        #expect(try BEP15Codec.decodeRequest(buffer("0000041727101980 00000000 deadbeef")).get() == request)
    }

    @Test func requestHeaderPeek() throws {
        let connect = try #require(BEP15Codec.peekHeader(buffer("0000041727101980 00000000 deadbeef")))
        #expect(connect.connectionID == bep15ProtocolID && connect.action == .connect && connect.transactionID == 0xDEAD_BEEF)
        let announce = try #require(BEP15Codec.peekHeader(buffer(Self.announceHex)))
        #expect(announce.connectionID == 0x1122_3344_5566_7788 && announce.action == .announce && announce.transactionID == 0x0A0B_0C0D)
        let unknown = try #require(BEP15Codec.peekHeader(buffer("1122334455667788 00000009 00000001")))
        #expect(unknown.action == nil && unknown.transactionID == 1)
        #expect(BEP15Codec.peekHeader(buffer("0000041727101980 00000000 dead")) == nil, "15 bytes have no header")
    }

    @Test func connectResponseBytes() throws {
        let response = TrackerResponse.connect(ConnectResponse(transactionID: 0x0102_0304, connectionID: 0x1122_3344_5566_7788))
        let expected = bytes("00000000 01020304 1122334455667788")
        #expect(BEP15Codec.encode(response).allBytes == expected)
        #expect(BEP15Codec.encodedSize(response) == expected.count)
        #expect(try BEP15Codec.decodeResponse(ByteBuffer(bytes: expected), family: .v4).get() == response)
    }

    static let announceHex = """
        1122334455667788 00000001 0a0b0c0d
        0123456789abcdef0123456789abcdef01234567
        2d54543030303125000000000000000000000007
        0000000000000064 00000000000003e8 0000000000000005
        00000002 7f000001 cafebabe ffffffff 1ae1
        """

    static let announce = AnnounceRequest(
        connectionID: 0x1122_3344_5566_7788, transactionID: 0x0A0B_0C0D, infoHash: hashA,
        peerID: PeerID(a: 0x2D54_5430_3030_3125, b: 0, c: 7), downloaded: 100, left: 1000, uploaded: 5,
        event: .started, ip: 0x7F00_0001, key: 0xCAFE_BABE, numWant: -1, port: 6881)

    @Test func announceRequestIs98BytesExactly() throws {
        let encoded = BEP15Codec.encode(.announce(Self.announce))
        #expect(encoded.readableBytes == 98)
        #expect(encoded.allBytes == bytes(Self.announceHex))
        #expect(try BEP15Codec.decodeRequest(buffer(Self.announceHex)).get() == .announce(Self.announce))
    }

    @Test func announceWithBEP41OptionsIsAccepted() throws {
        // libtorrent appends URL data (option type 2, length, "/announce") → 109 bytes.
        let withOptions = bytes(Self.announceHex) + [0x02, 0x09] + Array("/announce".utf8)
        #expect(withOptions.count == 109)
        #expect(try BEP15Codec.decodeRequest(ByteBuffer(bytes: withOptions)).get() == .announce(Self.announce))
    }

    /// The decoder reads the datagram's readable bytes, not its storage: a request behind
    /// bytes already read (a datagram sliced from a batch), with a partial hash after a
    /// scrape's two, decodes as alone.
    @Test func requestsAreReadFromTheReaderIndex() throws {
        var announce = ByteBuffer(bytes: [0xFF, 0xEE, 0xDD] + bytes(Self.announceHex))
        announce.moveReaderIndex(forwardBy: 3)
        #expect(try BEP15Codec.decodeRequest(announce).get() == .announce(Self.announce))
        #expect(BEP15Codec.peekHeader(announce)?.transactionID == 0x0A0B_0C0D)
        let scrape = bytes("0000000000000005 00000002 00000006 0123456789abcdef0123456789abcdef01234567 fedcba9876543210fedcba9876543210fedcba98 0102")
        var behind = ByteBuffer(bytes: Array(repeating: 0x55, count: 7) + scrape)
        behind.moveReaderIndex(forwardBy: 7)
        #expect(try BEP15Codec.decodeRequest(behind).get()
            == .scrape(ScrapeRequest(connectionID: 5, transactionID: 6, infoHashes: [hashA, hashB])))
    }

    @Test func announceResponseIPv4() throws {
        let response = TrackerResponse.announce(AnnounceResponse(
            transactionID: 9, interval: 1800, leechers: 2, seeders: 1,
            peers: [PeerEndpoint(ip: v4("10.0.0.1"), port: 6881), PeerEndpoint(ip: v4("192.168.1.200"), port: 51413)]))
        let expected = bytes("00000001 00000009 00000708 00000002 00000001 0a000001 1ae1 c0a801c8 c8d5")
        #expect(BEP15Codec.encode(response).allBytes == expected)
        #expect(BEP15Codec.encodedSize(response) == expected.count)
        #expect(try BEP15Codec.decodeResponse(ByteBuffer(bytes: expected), family: .v4).get() == response)
    }

    @Test func announceResponseIPv6Uses18ByteEntries() throws {
        let peer = PeerEndpoint(ip: IPAddress("2001:db8::1")!, port: 6881)
        let response = TrackerResponse.announce(AnnounceResponse(transactionID: 1, interval: 60, leechers: 0, seeders: 1, peers: [peer]))
        let expected = bytes("00000001 00000001 0000003c 00000000 00000001 20010db8000000000000000000000001 1ae1")
        #expect(expected.count == 20 + 18)
        #expect(BEP15Codec.encode(response).allBytes == expected)
        #expect(BEP15Codec.encodedSize(response) == expected.count)
        #expect(try BEP15Codec.decodeResponse(ByteBuffer(bytes: expected), family: .v6).get() == response)
    }

    /// A swarm's window is written straight into wire entries: the bytes BEP 23 gives for
    /// each peer of the requester's family, and the decoded endpoints read them back.
    @Test func compactPeersFromASwarmAreWireEntries() throws {
        var store = SwarmStore()
        let four = PeerEndpoint(ip: v4("192.168.1.200"), port: 51413)
        let six = PeerEndpoint(ip: IPAddress("2001:db8::1")!, port: 6881)
        for (i, e) in [four, six].enumerated() {
            store.apply(.announce(Announce(infoHash: hashA, peerID: peerID(UInt32(i)), endpoint: e, uploaded: 0, downloaded: 0,
                                           left: 1, event: .started, at: Instant(milliseconds: 1))))
        }
        let swarm = try #require(store[hashA])
        var rng = SeededGenerator(seed: 1)
        let asker4 = PeerKey(peerID: peerID(7), ip: v4("10.0.0.9"))
        let asker6 = PeerKey(peerID: peerID(8), ip: IPAddress("2001:db8::9")!)
        let window4 = swarm.selectPeers(for: asker4, count: 50, rng: &rng)
        #expect(window4.family == .v4 && window4.bytes == bytes("c0a801c8 c8d5") && window4.endpoints == [four])
        let window6 = swarm.selectPeers(for: asker6, count: 50, rng: &rng)
        #expect(window6.family == .v6 && window6.bytes == bytes("20010db8000000000000000000000001 1ae1") && window6.endpoints == [six])
        // The requester itself is never among its peers, and nothing is written for it.
        let own = swarm.selectPeers(for: PeerKey(peerID: peerID(0), ip: four.ip), count: 50, rng: &rng)
        #expect(own.isEmpty && own.bytes.isEmpty)
    }

    @Test func compactPeersTakeOnlyWholeEntriesFromTheWire() throws {
        #expect(CompactPeers(family: .v4, wire: bytes("0a000001 1ae1 0a00")) == nil)
        // Two IPv4 entries are not an IPv6 one; three are, to a reader told IPv6.
        #expect(CompactPeers(family: .v6, wire: bytes("0a000001 1ae1 0a000002 1ae1")) == nil)
        #expect(CompactPeers(family: .v6, wire: bytes("0a000001 1ae1 0a000002 1ae1 0a000003 1ae1"))?.count == 1)
        #expect(CompactPeers(family: .v6, wire: bytes("0a000001 1ae1 0a000002 1ae1 0a000003 1ae1 0a00")) == nil)
        let truncated = bytes("00000001 00000009 00000708 00000002 00000001 0a000001 1ae1 c0a8")
        #expect(throws: ResponseDecodingError.self) { try BEP15Codec.decodeResponse(ByteBuffer(bytes: truncated), family: .v4).get() }
        // No peers is the same answer whichever family it would have carried.
        #expect(CompactPeers(family: .v4) == CompactPeers(family: .v6))
        #expect(CompactPeers([PeerEndpoint(ip: v4("10.0.0.1"), port: 1)]) != CompactPeers([PeerEndpoint(ip: IPAddress("::a00:1")!, port: 1)]))
    }

    @Test func scrapeRequestAndResponse() throws {
        let request = TrackerRequest.scrape(ScrapeRequest(connectionID: 5, transactionID: 6, infoHashes: [hashA, hashB]))
        let expected = bytes("0000000000000005 00000002 00000006 0123456789abcdef0123456789abcdef01234567 fedcba9876543210fedcba9876543210fedcba98")
        #expect(expected.count == 16 + 20 * 2)
        #expect(BEP15Codec.encode(request).allBytes == expected)
        #expect(try BEP15Codec.decodeRequest(ByteBuffer(bytes: expected)).get() == request)

        let response = TrackerResponse.scrape(ScrapeResponse(transactionID: 6, entries: [
            ScrapeEntry(seeders: 3, completed: 10, leechers: 4), ScrapeEntry(seeders: 0, completed: 0, leechers: 0)]))
        let expectedResponse = bytes("00000002 00000006 00000003 0000000a 00000004 00000000 00000000 00000000")
        #expect(expectedResponse.count == 8 + 12 * 2)
        #expect(BEP15Codec.encode(response).allBytes == expectedResponse)
        #expect(BEP15Codec.encodedSize(response) == expectedResponse.count)
        #expect(try BEP15Codec.decodeResponse(ByteBuffer(bytes: expectedResponse), family: .v4).get() == response)
    }

    @Test func errorResponse() throws {
        let response = TrackerResponse.error(ErrorResponse(transactionID: 0x42, message: "nope"))
        let expected = bytes("00000003 00000042") + Array("nope".utf8)
        #expect(BEP15Codec.encode(response).allBytes == expected)
        #expect(BEP15Codec.encodedSize(response) == expected.count)
        #expect(try BEP15Codec.decodeResponse(ByteBuffer(bytes: expected), family: .v4).get() == response)
    }
}

@Suite("BEP 15 decoding errors")
struct DecodingErrorTests {
    @Test(arguments: [0, 1, 8, 15])
    func shortDatagramsAreUnaddressable(length: Int) {
        let result = BEP15Codec.decodeRequest(ByteBuffer(bytes: Array(repeating: 0xAB, count: length)))
        #expect(result == .failure(RequestDecodingError(reason: .truncatedHeader(length: length), transactionID: nil)))
    }

    @Test func wrongProtocolIDIsAnAddressableError() throws {
        let result = BEP15Codec.decodeRequest(buffer("0000041727101981 00000000 00000007"))
        #expect(result == .failure(RequestDecodingError(reason: .badProtocolID(0x41727101981), transactionID: 7)))
    }

    @Test func unknownAction() throws {
        let result = BEP15Codec.decodeRequest(buffer("0000000000000001 00000009 00000007"))
        #expect(result == .failure(RequestDecodingError(reason: .unknownAction(9), transactionID: 7)))
        // A peer may not send action 3 (error) either.
        #expect(BEP15Codec.decodeRequest(buffer("0000000000000001 00000003 00000007"))
            == .failure(RequestDecodingError(reason: .unknownAction(3), transactionID: 7)))
    }

    @Test func truncatedAnnounce() throws {
        let short = Array(bytes(CodecVectorTests.announceHex).prefix(97))
        #expect(BEP15Codec.decodeRequest(ByteBuffer(bytes: short))
            == .failure(RequestDecodingError(reason: .truncatedAnnounce(length: 97), transactionID: 0x0A0B_0C0D)))
    }

    @Test func scrapeBounds() throws {
        let header = bytes("0000000000000005 00000002 00000006")
        #expect(BEP15Codec.decodeRequest(ByteBuffer(bytes: header))
            == .failure(RequestDecodingError(reason: .emptyScrape, transactionID: 6)))
        let seventyFive = header + Array(repeating: 1, count: 20 * 75)
        #expect(BEP15Codec.decodeRequest(ByteBuffer(bytes: seventyFive))
            == .failure(RequestDecodingError(reason: .tooManyScrapeHashes(75), transactionID: 6)))
        let seventyFour = header + Array(repeating: 1, count: 20 * 74)
        guard case .success(.scrape(let r)) = BEP15Codec.decodeRequest(ByteBuffer(bytes: seventyFour)) else {
            Issue.record("74 hashes must decode"); return
        }
        #expect(r.infoHashes.count == 74)
    }

    @Test func unknownEventIsTreatedAsNone() throws {
        var raw = bytes(CodecVectorTests.announceHex)
        raw[83] = 9  // low byte of the event field
        guard case .success(.announce(let a)) = BEP15Codec.decodeRequest(ByteBuffer(bytes: raw)) else {
            Issue.record("must decode"); return
        }
        #expect(a.event == AnnounceEvent.none)
    }

    @Test func malformedResponsesAreTypedErrors() throws {
        #expect(throws: ResponseDecodingError.self) { try BEP15Codec.decodeResponse(buffer("000000"), family: .v4).get() }
        #expect(throws: ResponseDecodingError.self) {
            try BEP15Codec.decodeResponse(buffer("00000001 00000001 00000001 00000000 00000000 0102030405"), family: .v4).get()
        }
        #expect(throws: ResponseDecodingError.self) { try BEP15Codec.decodeResponse(buffer("00000007 00000001"), family: .v4).get() }
    }
}
