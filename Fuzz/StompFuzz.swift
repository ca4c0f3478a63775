import Foundation
import NIOCore
import STOMP

/// libFuzzer target: the STOMP 1.2 frame decoder, fed what a hostile broker might send.
/// Properties: decoding is total (a value, nil for "need more", or a typed error); a
/// decoded frame re-encodes to bytes that decode to the same frame (up to the
/// content-length header the encoder adds to every frame with a body); and the stream
/// decoder the connection uses, fed the same bytes in reads of fuzzer-chosen sizes, yields
/// the same frames as one decode of the whole; and a whole client session fed the bytes
/// as its broker's stream keeps its invariants (`checkSession`).
@_cdecl("LLVMFuzzerTestOneInput")
public func stompFuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    checkStreamDecoder(bytes)
    checkSession(bytes)
    var buffer = ByteBuffer(bytes: bytes)
    var frames = 0
    while frames < 64, buffer.readableBytes > 0 {
        let before = buffer.readableBytes
        guard let decoded = try? StompCodec.decode(&buffer) else { break }
        frames += 1
        // CONNECT and CONNECTED are not escaped (STOMP 1.2): a header value ending in CR
        // reads back as a CRLF line end, so such a frame has no exact encoding.
        if case .frame(let frame) = decoded, frame.escapesHeaders || !frame.headers.contains(where: { $0.value.hasSuffix("\r") }) {
            var encoded = StompCodec.encode(frame)
            // The encoder may add a content-length header and escapes may lengthen the
            // header section: read it back with room for that.
            var roomy = StompLimits()
            roomy.maxHeaderLines += 1
            roomy.maxHeaderBytes *= 4
            guard case .frame(let again)? = try? StompCodec.decode(&encoded, limits: roomy), withoutLength(again) == withoutLength(frame),
                  encoded.readableBytes == 0 else {
                fatalError("STOMP frame does not round-trip: \(frame.command)")
            }
        }
        if buffer.readableBytes >= before { fatalError("the decoder consumed nothing and returned a value") }
    }
    return 0
}

func withoutLength(_ frame: StompFrame) -> StompFrame {
    var f = frame
    f.headers = f.headers.filter { $0.name != "content-length" }
    return f
}

/// The first byte picks the read size (1 to 256 bytes); the rest is the stream. Every
/// frame the stream decoder yields is the next one a whole decode yields, and every frame
/// a whole decode yields comes out of the stream decoder (an error there would drop a
/// connection the whole decode keeps).
func checkStreamDecoder(_ bytes: UnsafeBufferPointer<UInt8>) {
    guard let first = bytes.first else { return }
    let stream = UnsafeBufferPointer(rebasing: bytes.dropFirst())
    let chunk = Int(first) + 1
    var whole = ByteBuffer(bytes: stream)
    var expected: [StompCodec.Decoded] = []
    while expected.count < 64, let decoded = try? StompCodec.decode(&whole) { expected.append(decoded) }
    var decoder = StompStreamDecoder()
    var pending = ByteBuffer()
    var got: [StompCodec.Decoded] = []
    var offset = 0
    while offset < stream.count, got.count < expected.count {
        let end = min(stream.count, offset + chunk)
        pending.writeBytes(UnsafeBufferPointer(rebasing: stream[offset..<end]))
        offset = end
        while got.count < expected.count {
            let decoded: StompCodec.Decoded?
            do { decoded = try decoder.decode(&pending) } catch { fatalError("the stream decoder refused a frame a whole decode yields: \(error)") }
            guard let decoded else { break }
            guard decoded == expected[got.count] else { fatalError("the stream decoder yielded another frame than a whole decode") }
            got.append(decoded)
        }
    }
    if got.count < expected.count { fatalError("the stream decoder missed a frame a whole decode yields") }
}

/// A client session whose broker sends the fuzzer's bytes: the first byte picks the read
/// size and how far the clock moves between reads; every connection the session opens is
/// accepted at once and gets the rest of the stream. Properties: nothing traps; the
/// session writes only to the connection it calls current and never to one it closed;
/// it is ready only after a CONNECTED on that connection; every timer it asks for lies
/// ahead of the clock and within a minute (a hostile broker can neither make the host
/// spin nor put the session to sleep); and each event answers with a bounded number of
/// actions.
func checkSession(_ bytes: UnsafeBufferPointer<UInt8>) {
    guard let first = bytes.first else { return }
    let stream = UnsafeBufferPointer(rebasing: bytes.dropFirst())
    let chunk = Int(first & 0x3F) + 1
    let step = TimeAmount.milliseconds(Int64(first >> 6) * 400 + 7)
    var settings = StompSettings(host: "127.0.0.1", port: 61613)
    settings.fallbacks = [BrokerAddress(host: "127.0.0.1", port: 61614)]
    var session = StompSession(settings: settings)
    var now = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    var closed = Set<StompSession.Attempt>()
    /// The connection opened last and not closed since, as the actions tell it.
    var live: StompSession.Attempt?
    var connectedOn: StompSession.Attempt?

    func apply(_ actions: [StompSession.Action]) {
        if actions.count > 16 { fatalError("one event answered with \(actions.count) actions") }
        for action in actions {
            switch action {
            case .connect(_, let a):
                if live != nil { fatalError("a second connection while #\(live ?? 0) is open") }
                live = a
                apply(session.connected(a, now: now))
            case .write(let outbound, let a):
                if closed.contains(a) || a != live { fatalError("wrote \(outbound) to #\(a), live \(String(describing: live))") }
            case .close(let a):
                closed.insert(a)
                if live == a { live = nil }
            case .deliver(.ready):
                if connectedOn == nil || connectedOn != session.current || !session.isReady { fatalError("ready without CONNECTED") }
            case .deliver, .disconnected, .log: break
            }
        }
        if let wake = session.nextWake, wake > now + .seconds(61) { fatalError("a timer more than a minute ahead") }
    }

    _ = session.subscribe("/topic/cluster")
    apply(session.start(now: now))
    var decoder = StompStreamDecoder()
    var pending = ByteBuffer()
    var offset = 0
    var events = 0
    while offset < stream.count, events < 256 {
        let end = min(stream.count, offset + chunk)
        pending.writeBytes(UnsafeBufferPointer(rebasing: stream[offset..<end]))
        offset = end
        guard let attempt = session.current else { break }
        while events < 256 {
            events += 1
            let decoded: StompCodec.Decoded?
            do { decoded = try decoder.decode(&pending) } catch {
                decoder = StompStreamDecoder()
                pending.clear()
                apply(session.malformed(attempt, error: "\(error)", now: now))
                break
            }
            guard let decoded else { break }
            if case .frame(let f) = decoded, f.command == "CONNECTED" { connectedOn = attempt }
            apply(session.received(decoded, on: attempt, now: now))
        }
        // The clock moves; every timer due fires, and none may be due again at once.
        now = now + step
        var fired = 0
        while let wake = session.nextWake, wake <= now {
            fired += 1
            if fired > 64 { fatalError("timers due again and again at one instant") }
            let before = wake
            apply(session.tick(now: now))
            if let again = session.nextWake, again <= before { fatalError("a timer that does not move") }
        }
    }
}
