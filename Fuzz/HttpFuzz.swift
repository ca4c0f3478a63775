import TrackerLogic

/// libFuzzer target: the HTTP tracker's request heads, query decoders and the bencode
/// codec. Properties: parsing a head is total and bounded (a head it accepts ends within
/// the bytes given and the bound, with a target that starts with `/`), and the client
/// taken behind a trusted proxy is never one of the proxies unless it is the connection;
/// decoding a query as an announce and as a scrape is total, and what it accepts holds
/// its invariants (20-byte hashes, a port above 0, at most the scrape cap); the bencode
/// decoder accepts only canonical encodings, so what it accepts the encoder writes back
/// byte for byte.
let proxies = TrustedProxies([IPNetwork("10.0.0.0/8")!, IPNetwork("2001:db8::/32")!])

@_cdecl("LLVMFuzzerTestOneInput")
public func httpFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if case .head(let head, let length) = HTTPRequestHead.parse(bytes) {
        if length > bytes.count || length > HTTPRequestHead.maxHeadBytes + 4 || head.target.first != UInt8(ascii: "/") {
            fatalError("head accepted beyond its bytes or bound: \(length) of \(bytes.count)")
        }
        let connection = IPAddress.v4(0x0A00_0001)
        let client = proxies.client(connection: connection, head: head)
        if client != connection, proxies.trusts(client) { fatalError("a trusted proxy taken for the client: \(client)") }
        _ = HTTPTrackerRequest.decode(head)
    }
    if case .success(let a) = HTTPAnnounce.decode(query: bytes) {
        if a.port == 0 || a.uploaded < 0 || a.downloaded < 0 || a.left < 0 { fatalError("announce accepted out of range: \(a)") }
    }
    if case .success(let hashes) = HTTPScrape.decode(query: bytes) {
        if hashes.isEmpty || hashes.count > HTTPTrackerQuery.maxScrapeHashes { fatalError("scrape of \(hashes.count) hashes accepted") }
    }
    if let value = try? BencodeDecoder().decode(bytes), value.encoded != bytes {
        fatalError("bencode accepted a non-canonical encoding, or the encoder is not canonical")
    }
    return 0
}
