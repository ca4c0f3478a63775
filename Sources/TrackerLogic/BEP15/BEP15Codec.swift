import NIOCore

/// Why a datagram is not a valid request. When the header was readable the tracker
/// answers with a BEP 15 error carrying `transactionID`; otherwise it stays silent,
/// since there is nobody to address the answer to.
public struct RequestDecodingError: Error, Hashable, Sendable {
    public enum Reason: Hashable, Sendable {
        /// Fewer than the 16 header bytes: not addressable, dropped without reply.
        case truncatedHeader(length: Int)
        case badProtocolID(UInt64)
        case unknownAction(UInt32)
        case truncatedAnnounce(length: Int)
        case emptyScrape
        case tooManyScrapeHashes(Int)
        /// Decoded fine, but the source is over its rate limit: dropped without reply.
        case rateLimited
        /// Decoded fine, but without a valid connection id and too short for any reply.
        case invalidConnectionID
    }

    public var reason: Reason
    /// Known whenever the 16-byte header could be read.
    public var transactionID: UInt32?

    public init(reason: Reason, transactionID: UInt32?) {
        self.reason = reason; self.transactionID = transactionID
    }

    /// The text sent to the peer in the BEP 15 error.
    public var message: String {
        switch reason {
        case .truncatedHeader(let n): return "datagram too short (\(n) bytes)"
        case .badProtocolID: return "invalid protocol id in connect request"
        case .unknownAction(let a): return "unknown action \(a)"
        case .truncatedAnnounce(let n): return "announce too short (\(n) of 98 bytes)"
        case .emptyScrape: return "scrape names no info hash"
        case .tooManyScrapeHashes(let n): return "scrape names \(n) info hashes; at most \(BEP15Codec.maxScrapeHashes)"
        case .rateLimited: return "too many requests from this address"
        case .invalidConnectionID: return PeerRequestHandler.invalidConnectionIDMessage
        }
    }
}

/// Why a datagram is not a valid response (used by the client and the load generator).
public struct ResponseDecodingError: Error, Hashable, Sendable {
    public var description: String
}

/// BEP 15 byte layouts, both directions. Decoding is total: every byte string yields a
/// value or a typed error; nothing traps. All integers are big-endian.
public enum BEP15Codec {
    public static let connectRequestSize = 16
    public static let connectResponseSize = 16
    public static let announceRequestSize = 98
    public static let announceResponseHeaderSize = 20
    public static let scrapeRequestHeaderSize = 16
    public static let scrapeResponseHeaderSize = 8
    /// 74 × 12 + 8 = 896 bytes of response: what fits a conservative UDP payload.
    public static let maxScrapeHashes = 74

    // MARK: Requests

    /// The fixed 16-byte header every request starts with, read without decoding the rest
    /// (for code that only sorts requests, such as a node holding them during an
    /// election). The first word is the protocol id of a connect, else a connection id;
    /// `action` is nil for an unknown action.
    public static func peekHeader(_ datagram: ByteBuffer) -> (connectionID: UInt64, action: TrackerAction?, transactionID: UInt32)? {
        let bytes = datagram.readableBytesSpan
        guard bytes.byteCount >= 16 else { return nil }
        return (BigEndianFields.u64(bytes, 0), TrackerAction(rawValue: BigEndianFields.u32(bytes, 8)),
                BigEndianFields.u32(bytes, 12))
    }

    /// Trailing bytes after an announce's 98 are BEP 41 options, read only for a tracker
    /// key in the URL data's path (`URLDataOption`); bytes after a connect's 16, and a
    /// partial trailing hash in a scrape, are ignored.
    public static func decodeRequest(_ datagram: ByteBuffer) -> Result<TrackerRequest, RequestDecodingError> {
        let bytes = datagram.readableBytesSpan
        let length = bytes.byteCount
        guard length >= 16 else {
            return .failure(.init(reason: .truncatedHeader(length: length), transactionID: nil))
        }
        let connectionID = BigEndianFields.u64(bytes, 0)
        let rawAction = BigEndianFields.u32(bytes, 8)
        let transactionID = BigEndianFields.u32(bytes, 12)
        func fail(_ reason: RequestDecodingError.Reason) -> Result<TrackerRequest, RequestDecodingError> {
            .failure(.init(reason: reason, transactionID: transactionID))
        }
        switch TrackerAction(rawValue: rawAction) {
        case .connect:
            guard connectionID == bep15ProtocolID else { return fail(.badProtocolID(connectionID)) }
            return .success(.connect(ConnectRequest(transactionID: transactionID)))
        case .announce:
            guard length >= announceRequestSize else { return fail(.truncatedAnnounce(length: length)) }
            // An unknown event value is treated as a regular update, as most trackers do.
            let event = AnnounceEvent(rawValue: BigEndianFields.u32(bytes, 80)) ?? .none
            return .success(.announce(AnnounceRequest(
                connectionID: connectionID, transactionID: transactionID,
                infoHash: BigEndianFields.bytes20(bytes, 16), peerID: BigEndianFields.bytes20(bytes, 36),
                downloaded: BigEndianFields.i64(bytes, 56), left: BigEndianFields.i64(bytes, 64),
                uploaded: BigEndianFields.i64(bytes, 72), event: event, ip: BigEndianFields.u32(bytes, 84),
                key: BigEndianFields.u32(bytes, 88), numWant: Int32(bitPattern: BigEndianFields.u32(bytes, 92)),
                port: BigEndianFields.u16(bytes, 96),
                trackerKey: length > announceRequestSize
                    ? URLDataOption.trackerKey(inPath: URLDataOption.urlData(bytes, from: announceRequestSize)) : nil)))
        case .scrape:
            let count = (length - scrapeRequestHeaderSize) / 20
            guard count > 0 else { return fail(.emptyScrape) }
            guard count <= maxScrapeHashes else { return fail(.tooManyScrapeHashes(count)) }
            var hashes: [InfoHash] = []
            hashes.reserveCapacity(count)
            for i in 0..<count { hashes.append(BigEndianFields.bytes20(bytes, scrapeRequestHeaderSize + 20 * i)) }
            return .success(.scrape(ScrapeRequest(connectionID: connectionID, transactionID: transactionID, infoHashes: hashes)))
        case .error, nil:
            return fail(.unknownAction(rawAction))
        }
    }

    public static func encode(_ request: TrackerRequest, into buffer: inout ByteBuffer) {
        switch request {
        case .connect(let r):
            buffer.writeInteger(bep15ProtocolID)
            buffer.writeInteger(TrackerAction.connect.rawValue)
            buffer.writeInteger(r.transactionID)
        case .announce(let r):
            buffer.writeInteger(r.connectionID)
            buffer.writeInteger(TrackerAction.announce.rawValue)
            buffer.writeInteger(r.transactionID)
            r.infoHash.write(to: &buffer)
            r.peerID.write(to: &buffer)
            buffer.writeInteger(r.downloaded)
            buffer.writeInteger(r.left)
            buffer.writeInteger(r.uploaded)
            buffer.writeInteger(r.event.rawValue)
            buffer.writeInteger(r.ip)
            buffer.writeInteger(r.key)
            buffer.writeInteger(r.numWant)
            buffer.writeInteger(r.port)
            if let k = r.trackerKey { URLDataOption.encode(path: Array("/announce/".utf8) + k.bytes, into: &buffer) }
        case .scrape(let r):
            buffer.writeInteger(r.connectionID)
            buffer.writeInteger(TrackerAction.scrape.rawValue)
            buffer.writeInteger(r.transactionID)
            for h in r.infoHashes { h.write(to: &buffer) }
        }
    }

    public static func encode(_ request: TrackerRequest) -> ByteBuffer {
        var buffer = ByteBuffer()
        encode(request, into: &buffer)
        return buffer
    }

    // MARK: Responses

    public static func encode(_ response: TrackerResponse, into buffer: inout ByteBuffer) {
        switch response {
        case .connect(let r):
            buffer.writeInteger(TrackerAction.connect.rawValue)
            buffer.writeInteger(r.transactionID)
            buffer.writeInteger(r.connectionID)
        case .announce(let r):
            writeAnnounce(r, into: &buffer)
        case .scrape(let r):
            buffer.writeInteger(TrackerAction.scrape.rawValue)
            buffer.writeInteger(r.transactionID)
            for e in r.entries {
                buffer.writeInteger(e.seeders)
                buffer.writeInteger(e.completed)
                buffer.writeInteger(e.leechers)
            }
        case .error(let r):
            buffer.writeInteger(TrackerAction.error.rawValue)
            buffer.writeInteger(r.transactionID)
            buffer.writeString(r.message)
        }
    }

    public static func encode(_ response: TrackerResponse) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(encodedSize(response))
        encode(response, into: &buffer)
        return buffer
    }

    /// The bytes `encode` writes for `response`: a reply buffer allocated at this size
    /// never grows (an announce of 50 IPv4 peers is 320 bytes).
    public static func encodedSize(_ response: TrackerResponse) -> Int {
        switch response {
        case .connect: return 16
        case .announce(let r): return announceResponseHeaderSize + r.compactPeers.bytes.count
        case .scrape(let r): return 8 + 12 * r.entries.count
        case .error(let r): return 8 + r.message.utf8.count
        }
    }

    /// An announce's answer: the 20-byte header, then the peers as `CompactPeers` holds
    /// them (BEP 23's entries), written through one pointer. The answer is what a tracker
    /// sends most, and a `writeInteger` per field costs an exclusivity check and a
    /// capacity check each.
    static func writeAnnounce(_ r: AnnounceResponse, into buffer: inout ByteBuffer) {
        buffer.writeBigEndian(atMost: announceResponseHeaderSize + r.compactPeers.bytes.count) { w in
            w.put(TrackerAction.announce.rawValue); w.put(r.transactionID)
            w.put(r.interval); w.put(r.leechers); w.put(r.seeders)
            w.put(raw: r.compactPeers.bytes)
        }
    }

    /// Decodes a tracker's reply. `family` says how to read compact peers: it is the
    /// family of the address the request was sent over, which is the only thing that
    /// tells 6-byte entries from 18-byte ones.
    public static func decodeResponse(_ datagram: ByteBuffer, family: IPAddress.Family) -> Result<TrackerResponse, ResponseDecodingError> {
        var buffer = datagram
        guard let rawAction = buffer.readInteger(as: UInt32.self),
              let transactionID = buffer.readInteger(as: UInt32.self) else {
            return .failure(.init(description: "response shorter than 8 bytes"))
        }
        switch TrackerAction(rawValue: rawAction) {
        case .connect:
            guard let cid = buffer.readInteger(as: UInt64.self) else {
                return .failure(.init(description: "connect response shorter than 16 bytes"))
            }
            return .success(.connect(ConnectResponse(transactionID: transactionID, connectionID: cid)))
        case .announce:
            guard let interval = buffer.readInteger(as: UInt32.self),
                  let leechers = buffer.readInteger(as: UInt32.self),
                  let seeders = buffer.readInteger(as: UInt32.self) else {
                return .failure(.init(description: "announce response shorter than 20 bytes"))
            }
            guard let peers = CompactPeers(family: family, wire: buffer.readableBytesView) else {
                return .failure(.init(description: "announce response peer list is not a multiple of \(CompactPeers.entrySize(family)) bytes"))
            }
            return .success(.announce(AnnounceResponse(transactionID: transactionID, interval: interval,
                                                       leechers: leechers, seeders: seeders, compactPeers: peers)))
        case .scrape:
            guard buffer.readableBytes % 12 == 0 else {
                return .failure(.init(description: "scrape response body is not a multiple of 12 bytes"))
            }
            var entries: [ScrapeEntry] = []
            while buffer.readableBytes > 0 {
                entries.append(ScrapeEntry(seeders: buffer.readInteger()!, completed: buffer.readInteger()!,
                                           leechers: buffer.readInteger()!))
            }
            return .success(.scrape(ScrapeResponse(transactionID: transactionID, entries: entries)))
        case .error:
            let message = buffer.readString(length: buffer.readableBytes) ?? ""
            return .success(.error(ErrorResponse(transactionID: transactionID, message: message)))
        case nil:
            return .failure(.init(description: "unknown action \(rawAction)"))
        }
    }
}
