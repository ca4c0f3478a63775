import TrackerLogic

/// libFuzzer target: the HTTP tracker's query decoders and the bencode codec. Properties:
/// decoding a query as an announce and as a scrape is total, and what it accepts holds
/// its invariants (20-byte hashes, a port above 0, at most the scrape cap); the bencode
/// decoder accepts only canonical encodings, so what it accepts the encoder writes back
/// byte for byte.
@_cdecl("LLVMFuzzerTestOneInput")
public func httpFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
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
