import NIOCore
import TrackerLogic

/// Peer requests and replies counted by BEP 15 action and address family: the labels of
/// `tracker_requests_total` and `tracker_replies_total`, and what an operator reads to
/// tell an announce storm from a scrape storm, or IPv6 traffic from IPv4.
///
/// A request's type is read from its action field only (bytes 8–11), before any decoding,
/// so counting costs two loads and an add whatever the datagram holds. The family is the
/// sender's, with IPv4-mapped IPv6 addresses counted as IPv4 (a dual-stack socket reports
/// IPv4 senders that way).
public struct PeerTraffic: Sendable, Equatable {
    public enum Family: Int, CaseIterable, Sendable {
        case ipv4, ipv6
        public var label: String { self == .ipv4 ? "ipv4" : "ipv6" }
        init(_ ip: IPAddress) { self = ip.unmapped.family == .v4 ? .ipv4 : .ipv6 }
    }

    /// `invalid`: shorter than a request, or an action BEP 15 does not define.
    public enum RequestType: Int, CaseIterable, Sendable {
        case connect, announce, scrape, invalid
        public var label: String { ["connect", "announce", "scrape", "invalid"][rawValue] }

        /// Every BEP 15 request holds its action at bytes 8–11.
        public init(_ datagram: ByteBuffer) {
            guard datagram.readableBytes >= 16,
                  let action = datagram.getInteger(at: datagram.readerIndex + 8, as: UInt32.self) else { self = .invalid; return }
            switch action {
            case 0: self = .connect
            case 1: self = .announce
            case 2: self = .scrape
            default: self = .invalid
            }
        }
    }

    public enum ReplyType: Int, CaseIterable, Sendable {
        case connect, announce, scrape, error
        public var label: String { ["connect", "announce", "scrape", "error"][rawValue] }
        init(_ response: TrackerResponse) {
            switch response {
            case .connect: self = .connect
            case .announce: self = .announce
            case .scrape: self = .scrape
            case .error: self = .error
            }
        }
    }

    /// Indexed by `type.rawValue * 2 + family.rawValue`.
    var requests = [Int](repeating: 0, count: RequestType.allCases.count * 2)
    var replies = [Int](repeating: 0, count: ReplyType.allCases.count * 2)

    public init() {}

    public mutating func received(_ datagram: ByteBuffer, from source: PeerEndpoint) {
        requests[RequestType(datagram).rawValue * 2 + Family(source.ip).rawValue] &+= 1
    }

    public mutating func replied(_ response: TrackerResponse, to peer: PeerEndpoint) {
        replies[ReplyType(response).rawValue * 2 + Family(peer.ip).rawValue] &+= 1
    }

    public func requests(_ type: RequestType, _ family: Family) -> Int { requests[type.rawValue * 2 + family.rawValue] }
    public func replies(_ type: ReplyType, _ family: Family) -> Int { replies[type.rawValue * 2 + family.rawValue] }

    /// As `NodeStatus` carries them: type → family → count, every type and family listed.
    public var requestCounts: [String: [String: Int]] {
        Dictionary(uniqueKeysWithValues: RequestType.allCases.map { t in
            (t.label, Dictionary(uniqueKeysWithValues: Family.allCases.map { ($0.label, requests(t, $0)) }))
        })
    }

    public var replyCounts: [String: [String: Int]] {
        Dictionary(uniqueKeysWithValues: ReplyType.allCases.map { t in
            (t.label, Dictionary(uniqueKeysWithValues: Family.allCases.map { ($0.label, replies(t, $0)) }))
        })
    }
}
