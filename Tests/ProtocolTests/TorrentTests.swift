import NIOCore
import Testing
import TrackerLogic

/// A test-side bencoder: builds .torrent files whose hashes were computed independently
/// (Python's hashlib over the same bytes).
indirect enum B {
    case i(Int64), s([UInt8]), l([B]), d([(String, B)])
    static func t(_ text: String) -> B { .s(Array(text.utf8)) }

    var bytes: [UInt8] {
        switch self {
        case .i(let n): return Array("i\(n)e".utf8)
        case .s(let b): return Array("\(b.count):".utf8) + b
        case .l(let items): return [UInt8(ascii: "l")] + items.flatMap(\.bytes) + [UInt8(ascii: "e")]
        case .d(let entries):
            let sorted = entries.sorted { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) }
            return [UInt8(ascii: "d")] + sorted.flatMap { B.t($0.0).bytes + $0.1.bytes } + [UInt8(ascii: "e")]
        }
    }
}

enum Torrents {
    static let v1Single = B.d([("announce", .t("udp://tracker:6969")),
                               ("info", .d([("name", .t("debian.iso")), ("piece length", .i(32768)), ("length", .i(100_000)),
                                            ("pieces", .s([UInt8](repeating: 1, count: 80)))]))]).bytes
    static let v1Multi = B.d([("info", .d([
        ("name", .t("album")), ("piece length", .i(16384)),
        ("files", .l([.d([("length", .i(10000)), ("path", .l([.t("a.flac")]))]),
                      .d([("length", .i(6384)), ("path", .l([.t(".pad"), .t("6384")])), ("attr", .t("p"))]),
                      .d([("length", .i(20000)), ("path", .l([.t("cd2"), .t("b.flac")]))])])),
        ("pieces", .s([UInt8](repeating: 2, count: 60)))]))]).bytes
    static let v2 = B.d([("info", .d([
        ("name", .t("v2only")), ("piece length", .i(16384)), ("meta version", .i(2)),
        ("file tree", .d([("x.bin", .d([("", .d([("length", .i(5)), ("pieces root", .s([UInt8](repeating: 3, count: 32)))]))])),
                          ("dir", .d([("y.bin", .d([("", .d([("length", .i(7))]))]))]))]))]))]).bytes
    static let hybrid = B.d([("info", .d([
        ("name", .t("hybrid")), ("piece length", .i(16384)), ("meta version", .i(2)), ("length", .i(12)),
        ("pieces", .s([UInt8](repeating: 4, count: 20))),
        ("file tree", .d([("hybrid", .d([("", .d([("length", .i(12)), ("pieces root", .s([UInt8](repeating: 5, count: 32)))]))]))]))]))]).bytes

    static func info(_ fields: [(String, B)]) -> [UInt8] { B.d([("info", .d(fields))]).bytes }
}

@Suite("Bencode and .torrent files")
struct TorrentTests {
    func decode(_ text: String) throws(BencodeError) -> Bencode { try BencodeDecoder().decode(Array(text.utf8)) }
    func failure(_ text: String) -> BencodeError? {
        do { _ = try decode(text); return nil } catch { return error }
    }

    @Test func canonicalValuesDecodeByteExactly() throws {
        #expect(try decode("i42e") == .integer(42))
        #expect(try decode("i-3e") == .integer(-3))
        #expect(try decode("i0e") == .integer(0))
        #expect(try decode("i9223372036854775807e") == .integer(.max))
        #expect(try decode("i-9223372036854775808e") == .integer(.min))
        #expect(try decode("4:spam") == .bytes(Array("spam".utf8)))
        #expect(try decode("0:") == .bytes([]))
        #expect(try decode("l4:spami42ee") == .list([.bytes(Array("spam".utf8)), .integer(42)]))
        #expect(try decode("d3:bar4:spam3:fooi42ee") == .dictionary([
            BencodeEntry(key: Array("bar".utf8), value: .bytes(Array("spam".utf8)), range: 6..<12),
            BencodeEntry(key: Array("foo".utf8), value: .integer(42), range: 17..<21),
        ]))
    }

    @Test func everythingNonCanonicalIsRefusedWithItsOffset() {
        #expect(failure("i03e") == BencodeError(at: 1, "number with a leading zero"))
        #expect(failure("i-0e") == BencodeError(at: 1, "negative zero"))
        #expect(failure("ie") == BencodeError(at: 1, "number without digits"))
        #expect(failure("i1") == BencodeError(at: 2, "truncated"))
        #expect(failure("i9223372036854775808e") == BencodeError(at: 1, "number out of range"))
        #expect(failure("i1.5e") == BencodeError(at: 2, "unexpected byte 0x2e in a number"))
        #expect(failure("5:abc") == BencodeError(at: 0, "string of 5 bytes runs past the end"))
        #expect(failure("05:abcde") == BencodeError(at: 0, "number with a leading zero"))
        #expect(failure("-1:") == BencodeError(at: 0, "unexpected byte 0x2d"))
        #expect(failure("d3:fooi1e3:bari2ee") == BencodeError(at: 9, "dictionary keys out of order"))
        #expect(failure("d3:fooi1e3:fooi2ee") == BencodeError(at: 9, "duplicate dictionary key"))
        #expect(failure("di1ei2ee") == BencodeError(at: 1, "dictionary key is not a string"))
        #expect(failure("i1ei2e") == BencodeError(at: 3, "3 bytes after the value"))
        #expect(failure("") == BencodeError(at: 0, "empty input"))
        #expect(failure(String(repeating: "l", count: 65) + String(repeating: "e", count: 65)) == BencodeError(at: 64, "nested deeper than 64"))
        #expect(failure("l") == BencodeError(at: 1, "truncated"))
        #expect(failure("x") == BencodeError(at: 0, "unexpected byte 0x78"))
    }

    /// Total: random bytes and every truncation of a real file are answered, never trapped
    /// on; no strict prefix of a valid file is valid.
    @Test func theDecoderIsTotalOverRandomAndTruncatedInput() {
        var rng = SeededGenerator(seed: 0xBE4C0DE)
        let alphabet = Array("ild0123456789:e-".utf8)
        for _ in 0..<20_000 {
            let n = Int.random(in: 0..<64, using: &rng)
            let bytes = (0..<n).map { _ in Bool.random(using: &rng) ? alphabet.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng) }
            _ = try? BencodeDecoder().decode(bytes)
            _ = try? TorrentMetadata.parse(bytes)
        }
        for file in [Torrents.v1Single, Torrents.v1Multi, Torrents.v2, Torrents.hybrid] {
            #expect((try? TorrentMetadata.parse(file)) != nil)
            for cut in 0..<file.count {
                #expect((try? BencodeDecoder().decode(Array(file[..<cut]))) == nil)
            }
            // Single-byte corruptions: an error or another valid torrent, never a trap.
            for i in stride(from: 0, to: file.count, by: 3) {
                var bad = file
                bad[i] ^= 0x5A
                _ = try? TorrentMetadata.parse(bad)
            }
        }
    }

    @Test func v1SingleFile() throws {
        let m = try TorrentMetadata.parse(Torrents.v1Single)
        #expect(m.name == "debian.iso" && m.totalSize == 100_000 && m.fileCount == 1 && m.pieceLength == 32768)
        #expect(m.v1?.hex == "eff67d02ffa38408f7a7ef512deae304bdc2a908" && m.v2 == nil)
        #expect(m.swarmHashes.map(\.hex) == ["eff67d02ffa38408f7a7ef512deae304bdc2a908"])
    }

    @Test func v1MultiFileSkipsPaddingFiles() throws {
        let m = try TorrentMetadata.parse(Torrents.v1Multi)
        #expect(m.name == "album" && m.totalSize == 30000 && m.fileCount == 2)
        #expect(m.infoHash.hex == "6306888907ee5232ca87e0da8796c9b28765fe33")
    }

    @Test func v2AndHybridHashes() throws {
        let v2 = try TorrentMetadata.parse(Torrents.v2)
        #expect(v2.v1 == nil && v2.totalSize == 12 && v2.fileCount == 2)
        #expect(v2.v2.map { $0.map { String(format2: $0) }.joined() } == "927049edb1673882568670dbb894841c13aa7ca8e1869e59a2d48fd8ad3dd339")
        #expect(v2.infoHash.hex == "927049edb1673882568670dbb894841c13aa7ca8")
        let hybrid = try TorrentMetadata.parse(Torrents.hybrid)
        #expect(hybrid.swarmHashes.map(\.hex) == ["2b9856b6fab187abd70f1cab5da88f416c7f809e", "2a5bea4025c414d070c9d3e937a20a8db3b52217"])
    }

    @Test func malformedTorrentsSayWhy() {
        func why(_ bytes: [UInt8]) -> String? {
            do { _ = try TorrentMetadata.parse(bytes); return nil } catch { return error.message }
        }
        let pieces = B.s([UInt8](repeating: 1, count: 20))
        #expect(why(Array("garbage".utf8)) == "not bencoded: byte 0: unexpected byte 0x67")
        #expect(why(B.l([]).bytes) == "the file is not a dictionary")
        #expect(why(B.d([("announce", .t("x"))]).bytes) == "no info dictionary")
        #expect(why(Torrents.info([("piece length", .i(16384)), ("length", .i(1)), ("pieces", pieces)])) == "info.name missing or empty")
        #expect(why(Torrents.info([("name", .s([0xFF, 0xFE])), ("piece length", .i(16384)), ("length", .i(1)), ("pieces", pieces)]))
            == "info.name is not UTF-8")
        #expect(why(Torrents.info([("name", .t("x")), ("piece length", .i(0)), ("length", .i(1)), ("pieces", pieces)]))
            == "info.piece length missing or not positive")
        #expect(why(Torrents.info([("name", .t("x")), ("piece length", .i(16384)), ("length", .i(1)), ("files", .l([])), ("pieces", pieces)]))
            == "info must have exactly one of length and files")
        #expect(why(Torrents.info([("name", .t("x")), ("piece length", .i(16384)), ("length", .i(40000)), ("pieces", pieces)]))
            == "info.pieces holds 1 hashes; 40000 bytes in pieces of 16384 need 3")
        #expect(why(Torrents.info([("name", .t("x")), ("piece length", .i(16384)), ("length", .i(1)), ("pieces", .s([1, 2, 3]))]))
            == "info.pieces is not a multiple of 20 bytes")
        #expect(why(Torrents.info([("name", .t("x")), ("piece length", .i(16384))])) == "neither info.pieces (v1) nor info.meta version (v2)")
        #expect(why(Torrents.info([("name", .t("x")), ("piece length", .i(16384)), ("length", .i(Int64.max)), ("pieces", pieces)]))
            == "info.pieces holds 1 hashes; 9223372036854775807 bytes in pieces of 16384 need 562949953421312")
        #expect(why([UInt8](repeating: 0x30, count: TorrentMetadata.maxFileBytes + 1)) == "the file is 1048577 bytes; the limit is 1048576")
    }

    @Test func theCatalogueIndexesEverySwarmHashAndCountsBytes() throws {
        var c = Catalogue()
        let hybrid = try RegisteredTorrent(file: Torrents.hybrid, registeredAt: Instant(milliseconds: 5))
        c.apply(.register(hybrid))
        #expect(hybrid.metadata.swarmHashes.allSatisfy(c.isRegistered) && c.totalBytes == Torrents.hybrid.count)
        #expect(c.refusal(hybrid) == "\(hybrid.infoHash.hex) is already registered")
        c.apply(.unregister(hybrid.infoHash))
        #expect(c == Catalogue())
    }

    /// The access policy, on a standalone tracker (a cluster commits the same changes):
    /// open tracks every hash; allow only registered torrents and allowed hashes; deny
    /// every hash but denied ones. Rules of the other mode mean nothing.
    @Test func theAccessPolicyDecidesWhichHashesAreTracked() throws {
        var t = StandaloneTracker(handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))), seed: 1)
        let source = PeerEndpoint(ip: v4("10.1.1.1"), port: 7000)
        let now = Instant(milliseconds: 1_000_000)
        let id = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2)).issue(for: source.ip, now: now)
        let torrent = try RegisteredTorrent(file: Torrents.v1Single, registeredAt: now)
        let allowed = InfoHash(a: 7, b: 7, c: 7), denied = InfoHash(a: 8, b: 8, c: 8)
        func tracked(_ hash: InfoHash) -> String {
            switch t.receive(BEP15Codec.encode(.announce(AnnounceRequest(connectionID: id, transactionID: 7, infoHash: hash, peerID: peerID(1),
                                                                          downloaded: 0, left: 1, uploaded: 0, event: .started, ip: 0, key: 0,
                                                                          numWant: 10, port: 6881))), from: source, now: now) {
            case .announce?: "tracked"
            case .error(let e)?: e.message
            default: "?"
            }
        }
        #expect(t.apply(.register(torrent)) == nil)
        #expect(t.apply(.setAccessRule(.allow, [allowed])) == nil)
        #expect(t.apply(.setAccessRule(.deny, [denied])) == nil)
        let notAllowed = "torrent not registered with this tracker", isDenied = "torrent is denied by this tracker"
        for (mode, expected) in [(AccessMode.open, ["tracked", "tracked", "tracked", "tracked"]),
                                 (.allow, ["tracked", "tracked", notAllowed, notAllowed]),
                                 (.deny, ["tracked", "tracked", isDenied, "tracked"])] {
            #expect(t.apply(.setAccessMode(mode)) == nil)
            #expect([torrent.infoHash, allowed, denied, hashA].map(tracked) == expected, "\(mode)")
        }
        #expect(t.apply(.removeAccessRules([denied])) == nil)
        #expect(tracked(denied) == "tracked")
        #expect(t.apply(.removeAccessRules([denied])) == "none of these info hashes is in the access list")
        #expect(t.apply(.setAccessRule(.allow, [])) == "no info hashes given")
        #expect(t.apply(.setAccessRule(.allow, Array(repeating: allowed, count: AccessPolicy.maxHashesPerChange + 1)))
                == "at most 1000 info hashes per change")
    }

    @Test func catalogueChangesTravelAsTheFileAndAreReparsed() throws {
        let t = try RegisteredTorrent(file: Torrents.v1Multi, registeredAt: Instant(milliseconds: 1234))
        let tx = Transaction(ref: TxRef(epoch: Epoch(term: 1, master: NodeID(3)), txid: 1), updates: [.catalogue(.register(t)), .catalogue(.unregister(hashA))])
        for message: ClusterMessage in [.prepare(tx, previous: .zero, previousDigest: 0), .submit(.register(t)), .submit(.unregister(hashB)),
                                        .snapshot(Snapshot(lastCommitted: tx.ref, history: EpochHistory(runs: [.init(epoch: tx.ref.epoch, firstTxid: 1)]),
                                                           content: [], torrents: [t], digest: 9))] {
            let env = ClusterEnvelope(from: NodeID(3), incarnation: 1, epoch: tx.ref.epoch, to: nil, message: message)
            #expect(try ClusterCodec.decode(ClusterCodec.encode(env)).get() == env)
        }
        // A forwarded change must be a catalogue change: an announce smuggled into SUBMIT is refused.
        let submit = ClusterEnvelope(from: NodeID(2), incarnation: 1, epoch: tx.ref.epoch, to: NodeID(3), message: .submit(.unregister(hashA)))
        var bytes = ClusterCodec.encode(submit)
        bytes.setInteger(1 as UInt8, at: 28)
        #expect(throws: ClusterDecodingError.self) { try ClusterCodec.decode(bytes).get() }
        // A file that is no torrent does not decode, whatever the sender says it is.
        var corrupt = ClusterCodec.encode(ClusterEnvelope(from: NodeID(3), incarnation: 1, epoch: tx.ref.epoch, to: nil, message: .submit(.register(t))))
        corrupt.setInteger(UInt8(ascii: "x"), at: 28 + 1 + 8 + 4)
        #expect(throws: ClusterDecodingError.self) { try ClusterCodec.decode(corrupt).get() }
    }
}

extension String {
    init(format2 byte: UInt8) { self = (byte < 16 ? "0" : "") + String(byte, radix: 16) }
}
