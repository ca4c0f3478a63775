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
/// content-length header the encoder adds to every frame with a body).
@_cdecl("LLVMFuzzerTestOneInput")
public func stompFuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var buffer = ByteBuffer(bytes: UnsafeBufferPointer(start: data, count: size))
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
