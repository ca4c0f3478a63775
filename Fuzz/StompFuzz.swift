import NIOCore
// scripts/fuzz.sh compiles Sources/Runtime/STOMP/StompFrame.swift into this target's own
// module: the decoder needs NIOCore only, and instrumenting the whole runtime (HTTP,
// SQLite, metrics) for it took most of the fuzz phase's time.
#if canImport(TrackerRuntime)
import TrackerRuntime
#endif

/// libFuzzer target: the STOMP 1.2 frame decoder, fed what a hostile broker might send.
/// Properties: decoding is total (a value, nil for "need more", or a typed error); a
/// decoded frame re-encodes to bytes that decode to the same frame (up to the
/// content-length header the encoder adds to every frame with a body); and the stream
/// decoder the connection uses, fed the same bytes in reads of fuzzer-chosen sizes, yields
/// the same frames as one decode of the whole.
@_cdecl("LLVMFuzzerTestOneInput")
public func stompFuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    checkStreamDecoder(bytes)
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
