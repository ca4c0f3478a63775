import NIOCore
import TrackerLogic

func bytes(_ hex: String) -> [UInt8] {
    let clean = hex.filter { !$0.isWhitespace }
    var out: [UInt8] = []
    var i = clean.startIndex
    while i < clean.endIndex {
        let j = clean.index(i, offsetBy: 2)
        out.append(UInt8(clean[i..<j], radix: 16)!)
        i = j
    }
    return out
}

func buffer(_ hex: String) -> ByteBuffer { ByteBuffer(bytes: bytes(hex)) }

extension ByteBuffer {
    var allBytes: [UInt8] { getBytes(at: readerIndex, length: readableBytes) ?? [] }
}

let hashA = InfoHash(hex: "0123456789abcdef0123456789abcdef01234567")!
let hashB = InfoHash(hex: "fedcba9876543210fedcba9876543210fedcba98")!

func peerID(_ n: UInt32) -> PeerID { PeerID(a: 0x2D54_5430_3030_312D, b: 0, c: n) }

func v4(_ text: String) -> IPAddress { IPAddress(text)! }

/// Steps `node` as a follower that hears `keepalive` and ticks every 500 ms from `start`
/// until `end`; returns the instant of its last step.
func follow(_ node: inout TrackerNode, hearing keepalive: NodeEvent, from start: Instant, until end: Instant) -> Instant {
    var t = start
    while t < end {
        _ = node.step(keepalive, now: t)
        _ = node.step(.tick, now: t)
        t = t + Milliseconds(500)
    }
    return t - Milliseconds(500)
}
